"""Output transforms: choice, inverses, bins, Jacobians, recording."""

import json

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import logit
from scipy.stats import norm

from yieldwise.transducer.encoding import OutputTransform, choose_transform


def test_auto_choices():
    rng = np.random.default_rng(0)
    n = 500
    unit = rng.random(n)
    positive = rng.gamma(2.0, size=n)
    real = rng.normal(size=n)
    t = choose_transform(np.column_stack([unit, positive, real]), ["p", "g", "z"])
    assert t.kind == ("logit", "log", "identity")
    assert t.resolution == (None, None, None)
    assert t.model_dim_names == ("logit(p)", "log(g)", "z")
    probs = rng.dirichlet([1, 1, 1], size=n)
    s = choose_transform(probs, ["a", "b", "c"])
    assert s.is_simplex and s.model_dims == 2
    # two continuous model coordinates are rotated onto their principal axes
    assert s.is_rotated and s.model_dim_names == ("axis1", "axis2")
    assert OutputTransform(
        kind=s.kind, columns=s.columns, resolution=s.resolution, squeeze_n=s.squeeze_n
    ).model_dim_names == ("log(a/c)", "log(b/c)")


def test_two_correlated_coordinates_are_rotated_onto_their_principal_axes():
    # logits on the line b = -a (plus a little noise across it): the first axis is the
    # line's direction (1, -1) / sqrt(2), sign fixed by its largest entry (ties: the first)
    rng = np.random.default_rng(3)
    a = rng.normal(0, 5, 400)
    y = np.column_stack([a + 3, -a + 1 + rng.normal(0, 0.1, 400)])
    t = choose_transform(y, ["a", "b"])
    assert t.kind == ("identity", "identity") and t.is_rotated
    axes, centre = np.array(t.axes), np.array(t.centre)
    np.testing.assert_allclose(centre, y.mean(axis=0), atol=1e-12)
    np.testing.assert_allclose(np.abs(axes[0]), [2**-0.5, 2**-0.5], atol=2e-3)
    assert axes[0, 0] * axes[0, 1] < 0  # the direction of b = -a
    np.testing.assert_allclose(axes @ axes.T, np.eye(2), atol=1e-12)
    z = t.forward(y)
    # by hand: the centred outputs projected on the axes; the spread is along axis 1
    np.testing.assert_allclose(z, (y - y.mean(axis=0)) @ axes.T, atol=1e-12)
    assert z[:, 0].std() > 30 * z[:, 1].std()
    np.testing.assert_allclose(t.inverse(z), y, atol=1e-10)
    lower, upper, censored = t.intervals(y)
    assert censored.tolist() == [0, 0]
    np.testing.assert_array_equal(lower, z) and np.testing.assert_array_equal(upper, z)
    # a rotation and a shift have Jacobian 1: densities carry only the per-column factor
    unrotated = OutputTransform(kind=t.kind, columns=t.columns, resolution=t.resolution,
                                squeeze_n=t.squeeze_n)  # fmt: skip
    np.testing.assert_array_equal(t.log_jacobian(y), unrotated.log_jacobian(y))


def test_the_rotation_leaves_lattice_outputs_and_other_dimensions_alone():
    rng = np.random.default_rng(4)
    votes = rng.integers(0, 21, (300, 1)) / 20
    logits = rng.normal(size=(300, 1))
    # one lattice column: its bins are per axis, so no rotation
    mixed = choose_transform(np.column_stack([votes, logits]), ["v", "l"])
    assert mixed.resolution == (0.05, None) and not mixed.is_rotated
    # one or three dimensions: none
    assert not choose_transform(logits, ["l"]).is_rotated
    assert not choose_transform(rng.normal(size=(300, 3)), ["a", "b", "c"]).is_rotated


def test_a_rotated_transform_round_trips_and_its_record_is_checked():
    rng = np.random.default_rng(5)
    y = rng.multivariate_normal([0, 1], [[4, 3], [3, 4]], size=200)
    t = choose_transform(y, ["a", "b"])
    back = OutputTransform.from_json(t.to_json())
    assert back == t  # exact: JSON writes every float64 in full
    np.testing.assert_array_equal(back.forward(y), t.forward(y))
    record = json.loads(t.to_json())
    with pytest.raises(ValueError, match="orthonormal"):
        OutputTransform.from_json(json.dumps({**record, "axes": [[1.0, 0.0], [1.0, 0.0]]}))
    with pytest.raises(ValueError, match="centre must hold 2 finite numbers"):
        OutputTransform.from_json(json.dumps({**record, "centre": [0.0]}))
    with pytest.raises(ValueError, match="continuous coordinates only"):
        OutputTransform.from_json(json.dumps({**record, "resolution": [0.5, None]}))


def test_outputs_on_a_line_are_modelled_along_it():
    """Continuous coordinates on one line keep only the first principal axis: one model
    dimension, the position along the line, checked against the position computed by
    hand; off the line, an output is at its distance from it (by hand); the record
    round-trips and is checked."""
    rng = np.random.default_rng(9)
    z = rng.normal(0.3, 2.0, 300)
    y = np.column_stack([z / 2, -z / 2])  # two logits that are exact negatives
    t = choose_transform(y, ["l0", "l1"])
    assert t.is_rotated and t.is_projected
    assert (t.coordinate_dims, t.model_dims, t.model_dim_names) == (2, 1, ("axis1",))
    # the direction (1, -1) / sqrt(2), its largest entry (ties: the first) positive, so
    # the position is ((z - mean z) / 2 - (-(z - mean z) / 2)) / sqrt(2)
    np.testing.assert_allclose(t.axes, [[2**-0.5, -(2**-0.5)]], atol=1e-12)
    position = t.forward(y)
    assert position.shape == (300, 1)
    np.testing.assert_allclose(position[:, 0], (z - z.mean()) / np.sqrt(2), atol=1e-12)
    np.testing.assert_allclose(t.inverse(position), y, atol=1e-12)  # on the line: exact
    lower, upper, censored = t.intervals(y)
    assert censored.tolist() == [0] and (lower == position).all() and (upper == position).all()
    assert t.off_line(y).max() < 1e-12
    # (1, 1) - centre = (1 - m / 2, 1 + m / 2), m = mean z; its part along the line is
    # -m / sqrt(2) times the direction, which leaves (1, 1): distance sqrt(2)
    np.testing.assert_allclose(t.off_line(np.array([[1.0, 1.0], [2.0, -2.0]])),
                               [np.sqrt(2), 0.0], atol=1e-12)  # fmt: skip
    np.testing.assert_array_equal(t.log_jacobian(y), np.zeros(300))
    back = OutputTransform.from_json(t.to_json())
    assert back == t and back.is_projected
    record = json.loads(t.to_json())
    with pytest.raises(ValueError, match=r"axes 2 x 2 \(or 1 x 2, a line\)"):
        OutputTransform.from_json(json.dumps({**record, "axes": [[0.6, 0.0, 0.8]]}))
    with pytest.raises(ValueError, match="orthonormal"):
        OutputTransform.from_json(json.dumps({**record, "axes": [[1.0, 1.0]]}))
    # one column that never moves: the line is the other column's axis
    flat = choose_transform(np.column_stack([z, np.full(300, 3.0)]), ["a", "b"])
    assert flat.is_projected and np.allclose(flat.axes, [[1.0, 0.0]], atol=1e-12)
    np.testing.assert_allclose(flat.forward(np.column_stack([z, np.full(300, 3.0)]))[:, 0],
                               z - z.mean(), atol=1e-12)  # fmt: skip
    # a little spread across the line (1e-6 of the spread along it) keeps both axes
    near = y + np.column_stack([np.zeros(300), rng.normal(0, 1e-6, 300)])
    assert not choose_transform(near, ["l0", "l1"]).is_projected


def test_a_continuous_column_with_two_values_is_read_as_two_bins():
    """resolution=None (continuous) cannot model two distinct values (docs/model.md, "Hard
    labels"): they become a lattice of their spacing, with a LatticeWarning naming the
    column; one or three values stay continuous, silently. Two distinct rows of two
    columns are two bins on the line through them (the next test), here with a warning
    that the resolution given is replaced."""
    import warnings

    from yieldwise.transducer.encoding import LatticeWarning

    two = np.tile([-5.0, 5.0], 50)[:, None]
    with pytest.warns(LatticeWarning, match=r"column 's' takes only two distinct values"):
        t = choose_transform(two, ["s"], resolution=None)
    assert t.resolution == (10.0,)
    lower, upper, censored = t.intervals(np.array([[-5.0], [5.0]]))
    assert censored.tolist() == [1]
    np.testing.assert_allclose(np.column_stack([lower, upper]), [[-10.0, 0.0], [0.0, 10.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error", LatticeWarning)
        for values in ([0.5], [-5.0, 0.0, 5.0]):
            column = np.tile(values, 20)[:, None]
            assert choose_transform(column, ["s"], resolution=None).resolution == (None,)
    rows = np.tile([[-5.0, 5.0], [5.0, -5.0]], (50, 1))
    with pytest.warns(LatticeWarning, match="modelled on the line through them as two bins"):
        pair = choose_transform(rows, ["a", "b"], resolution=None)
    assert pair.model_dims == 1 and pair.line_resolution == pytest.approx(np.sqrt(200))


def test_two_distinct_outputs_of_two_coordinates_are_two_bins_on_their_line():
    """Hard labels given as two logits, (5, -5) and (-5, 5) (read per column as lattices
    of spacing 10): one model dimension, the position along the line through them, read
    as a lattice of their distance h = 10 sqrt(2), the points at -h/2 and h/2 in the bins
    [-h, 0] and [0, h] (by hand); the Jacobian is 1 / h; any point of the line is read as
    the bin that holds it; the record round-trips and is checked. "auto" does it
    silently; one distinct output is one position on the first coordinate's line; the
    rule needs rotation (joint outputs keep their coordinates)."""
    import warnings

    from yieldwise.transducer.encoding import LatticeWarning, few_points_on_a_line

    rows = np.tile([[5.0, -5.0], [-5.0, 5.0], [5.0, -5.0]], (20, 1))
    h = 10.0 * np.sqrt(2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LatticeWarning)
        t = choose_transform(rows, ["l0", "l1"])
    assert t.resolution == (None, None) and t.kind == ("identity", "identity")
    assert t.is_projected and t.model_dims == 1 and t.line_resolution == pytest.approx(h)
    # np.unique's first row (-5, 5) to the second (5, -5): direction (1, -1) / sqrt(2)
    np.testing.assert_allclose(t.centre, [0.0, 0.0], atol=0)
    np.testing.assert_allclose(t.axes, [[2**-0.5, -(2**-0.5)]], rtol=1e-15)
    np.testing.assert_allclose(t.forward(rows[:2])[:, 0], [h / 2, -h / 2], rtol=1e-15)
    lower, upper, censored = t.intervals(rows[:2])
    assert censored.tolist() == [1]
    np.testing.assert_allclose(np.column_stack([lower, upper]), [[0.0, h], [-h, 0.0]],
                               rtol=1e-15)  # fmt: skip
    assert lower[0, 0] == 0.0 and upper[1, 0] == 0.0  # one shared edge, exactly
    # points of the line: (1, -1) is in (5, -5)'s bin, (12, -12) one bin beyond it
    lo, hi, _ = t.intervals(np.array([[1.0, -1.0], [12.0, -12.0]]))
    np.testing.assert_allclose(np.column_stack([lo, hi]), [[0.0, h], [h, 2 * h]], rtol=1e-15)
    np.testing.assert_allclose(t.log_jacobian(rows[:2]), [-np.log(h)] * 2, rtol=1e-15)
    np.testing.assert_allclose(t.inverse(np.array([[h / 2], [-h / 2]])), rows[:2], atol=1e-12)
    back = OutputTransform.from_json(t.to_json())
    assert back == t
    record = json.loads(t.to_json())
    with pytest.raises(ValueError, match="line_resolution must be null or a positive spacing"):
        OutputTransform.from_json(json.dumps({**record, "line_resolution": -1.0}))
    with pytest.raises(ValueError, match="needs a projection onto a line"):
        OutputTransform.from_json(json.dumps({**record, "centre": None, "axes": None}))
    plain = {**record, "axes": [[2**-0.5, -(2**-0.5)], [2**-0.5, 2**-0.5]]}
    with pytest.raises(ValueError, match=r"needs a projection onto a line \(axes 1 x d\)"):
        OutputTransform.from_json(json.dumps(plain))
    # probability vectors of three classes, two distinct rows: on their line too
    vectors = np.tile([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]], (30, 1))
    simplex = choose_transform(vectors, ["a", "b", "c"])
    assert simplex.is_simplex and simplex.is_projected and simplex.line_resolution > 0
    # one distinct output: one position on the line of the first coordinate through it
    constant = choose_transform(np.tile([[0.5, 2.0]], (30, 1)), ["a", "b"])
    assert constant.is_projected and constant.line_resolution is None
    np.testing.assert_allclose(constant.axes, [[1.0, 0.0]])
    assert constant.forward(np.array([[0.5, 2.0]]))[0, 0] == 0.0
    # three distinct outputs keep their grid; joint outputs (rotate=False) theirs
    three = np.vstack([rows, [[0.5, 0.5]]])
    assert choose_transform(three, ["l0", "l1"]).model_dims == 2
    assert choose_transform(rows, ["l0", "l1"], rotate=False).model_dims == 2
    assert few_points_on_a_line(rows[:, :1], choose_transform(rows[:, :1], ["l0"])) is None


def test_vote_fractions_are_censored_bins_reaching_infinity():
    votes = np.tile([0, 0, 1, 1, 5, 200, 200, 199, 3, 3], 3) / 200
    t = choose_transform(votes[:, None], ["rf"])
    assert t.kind == ("logit",) and t.resolution == (0.005,)
    lower, upper, censored = t.intervals(votes[:, None])
    assert censored.tolist() == [1]
    assert lower[0, 0] == -np.inf and upper[0, 0] == pytest.approx(logit(0.0025))
    assert upper[5, 0] == np.inf and lower[5, 0] == pytest.approx(logit(1 - 0.0025))
    assert lower[4, 0] == pytest.approx(logit(0.0225)) and upper[4, 0] == pytest.approx(
        logit(0.0275)
    )


def test_forward_inverse_round_trip():
    rng = np.random.default_rng(1)
    y = np.column_stack([rng.random(50), rng.gamma(2, size=50), rng.normal(size=50)])
    y[0, 0] = 0.0  # exact zero, squeezed
    t = choose_transform(y, ["a", "b", "c"])
    np.testing.assert_allclose(t.inverse(t.forward(y)), y, atol=1e-12)
    probs = rng.dirichlet([2, 1, 1], size=40)
    s = choose_transform(probs, ["a", "b", "c"])
    np.testing.assert_allclose(s.inverse(s.forward(probs)), probs, atol=1e-12)


def test_log_jacobian_turns_model_densities_into_output_densities():
    # A standard normal density on the logit scale, mapped back to (0, 1), integrates to 1.
    t = OutputTransform(kind=("logit",), columns=("p",), resolution=(None,), squeeze_n=100)

    def density(p):
        y = np.array([[p]])
        return norm.pdf(t.forward(y)[0, 0]) * np.exp(t.log_jacobian(y)[0])

    total, _ = quad(density, 0, 1, limit=200)
    assert total == pytest.approx(1.0, abs=1e-6)
    log_t = OutputTransform(kind=("log",), columns=("g",), resolution=(None,), squeeze_n=100)

    def log_density(g):
        y = np.array([[g]])
        return norm.pdf(log_t.forward(y)[0, 0]) * np.exp(log_t.log_jacobian(y)[0])

    assert quad(log_density, 0, np.inf, limit=200)[0] == pytest.approx(1.0, abs=1e-6)


def test_simplex_jacobian_by_finite_differences():
    t = OutputTransform(kind=("simplex",), columns=("a", "b", "c"), resolution=(None,) * 3,
                        squeeze_n=50)  # fmt: skip
    p = np.array([[0.2, 0.3, 0.5]])
    eps = 1e-6
    jac = np.empty((2, 2))
    for j in range(2):
        up, down = p.copy(), p.copy()
        up[0, j] += eps
        up[0, 2] -= eps
        down[0, j] -= eps
        down[0, 2] += eps
        jac[:, j] = (t.forward(up)[0] - t.forward(down)[0]) / (2 * eps)
    assert t.log_jacobian(p)[0] == pytest.approx(np.log(abs(np.linalg.det(jac))), rel=1e-6)


def test_json_round_trip():
    t = choose_transform(np.array([[0.1], [0.2], [0.2], [0.1], [0.3], [0.3]]), ["x"])
    assert OutputTransform.from_json(t.to_json()) == t


@pytest.mark.parametrize(
    ("outputs", "spec", "match"),
    [
        (np.array([[0.5], [1.5]]), "logit", r"must lie in \[0, 1\]"),
        (np.array([[0.5], [-1.0]]), "log", "non-negative"),
        (np.array([[0.5], [0.0], [2.0]]), ("log",), "zeros"),
        (np.array([[0.5], [0.5]]), "probit", "must be 'auto' or one of"),
        (np.array([[0.5], [0.5]]), "simplex", "at least 2 output columns"),
        (np.array([[0.5, 0.1], [0.5, 0.2]]), ("logit",), "one of .* for each of the 2"),
    ],
)
def test_bad_transforms(outputs, spec, match):
    with pytest.raises(ValueError, match=match):
        choose_transform(outputs, [f"c{j}" for j in range(outputs.shape[1])], spec, None)


def test_check_at_predict_time():
    t = choose_transform(np.random.default_rng(2).random((20, 1)), ["p"])
    with pytest.raises(ValueError, match=r"1 column\(s\) \['p'\], found 2"):
        t.check(np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"must lie in \[0, 1\]"):
        t.check(np.array([[2.0]]))


def test_the_public_module_transforms_hands_on_the_encoding_names():
    """``yieldwise.transforms`` stays a public module: the encoding's own objects."""
    import yieldwise.transforms as public
    from yieldwise.transducer import encoding

    assert public.OutputTransform is encoding.OutputTransform
    assert public.choose_transform is encoding.choose_transform
    assert set(public.__all__) == {"OutputTransform", "choose_transform"}
