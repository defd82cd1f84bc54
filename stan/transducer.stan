// Probability transducer (docs/theory.md section 3; design and measurements in docs/model.md).
//
// Finite mixture of product kernels for the pair (class c, output y in R^D), theory 3.1:
//   F(c, y) = sum_k beta[k, c] prod_d kernel_kd(y_d),
// beta a distribution over (kernel, class). The kernels are fixed, not sampled: Normal
// densities centred on an even grid over the transformed outputs (a tensor grid for two
// dimensions, centres placed on the data for more), all of one width per dimension; for
// outputs recorded at a finite resolution (vote fractions) a kernel's value is the Normal
// probability of the output's bin (interval censoring). So the kernel value of every
// calibration row under every kernel is data (`kern`, computed once in Python by the same
// numpy code that makes predictions), and the likelihood is one (rows x K) by K product
// per class. Nothing can switch labels: every parameter is identified.
//
// The prior (what it must do: theory 3.1) acts on theta = log beta + const:
//   theta[k, c] = a[k] + f_c[k],  f_1 = 0,  beta = softmax over all (k, c) of theta,
// a the log-density of the outputs over the kernels and f_c the log-odds of class c
// against class 1 at kernel k. Both are smooth functions over the kernel locations:
//   a   = fixed_basis[:, 2:P] * a_fixed + tau_a    * smooth_basis * a_raw,
//   f_c = fixed_basis * f_fixed[:, c]   + tau_f[c] * smooth_basis * f_raw[:, c],
//   a_raw, f_raw ~ N(0, 1),  tau_a ~ N+(0, tau_a_scale),
//   tau_f ~ half-Student-t(tau_f_df, 0, tau_f_scale) for one output dimension (heavy
//   tailed: a half-Normal truncated non-monotone truths), N+(0, tau_f_scale) for more
//   (tau_f_df = 0; docs/model.md, "The log-odds' smoothness prior"),
// fixed_basis the functions the smoothing penalty leaves free (constant and linear terms:
// for a grid the null space of the second-difference penalty) with weak Normal priors,
// smooth_basis the penalty's other eigenvectors scaled by the inverse square roots of their
// eigenvalues (an intrinsic random walk of order two along each grid axis; for scattered
// centres a Gaussian process). As tau_f -> 0 the class log-odds become linear in the
// transformed output (Platt scaling is the model's smooth limit); larger tau_f lets
// non-monotone truths through; and since f_c is a smooth function with no per-kernel
// pseudo-counts, a region holding many items of one class and none of another reaches
// probabilities far below 1/m (no floor).
//
// Geometry. All of these live in one unconstrained vector
//   u = (a_fixed, log tau_a, a_raw, f_fixed, log tau_f, f_raw)   (matrices column-major),
// and the sampler moves z with u = u_centre + S z: u_centre is the posterior mode and S S'
// the inverse Hessian there (yieldwise/backends/_laplace.py),
// so z is close to standard Normal and NUTS's diagonal metric sees an isotropic target.
// A linear change of variables leaves the posterior unchanged (its Jacobian is constant);
// it removes the correlations between neighbouring kernels' coefficients that a diagonal
// metric cannot (docs/model.md: two logits, 255 -> 31 leapfrog steps per iteration).
// Of the inverse Hessian's eigen-directions (sd the square roots of its eigenvalues), the
// whitened coordinates below leave almost all at sd within a few per cent of 1, so the
// program applies the u_rank others only (the rest as 1), each on an axis of z of its own
// so that the sampler's diagonal metric can still rescale it:
//   u = u_centre + Q (u_axes .* z),  Q = I + u_left u_right',
// Q orthogonal with its first u_rank columns those directions (a product of u_rank
// Householder reflections: Q - I has rank u_rank), u_axes their sds, then 1. Two
// U x u_rank products per gradient instead of one U x U; an exact linear change of
// variables (docs/model.md, "The preconditioning in low rank").
// With u_centre = 0 and u_rank = 0 this is the plain non-centred model.
// Conditional whitening. A linear map cannot undo the curvature between a scale tau and the
// coefficients b ~ N(0, tau^2 I) it governs: with strong data the non-centred b / tau bends
// with tau (a banana), with weak data a centred b narrows with tau (a funnel), and tau's
// posterior can span two orders of magnitude. So each smooth block is sampled as
//   b = Q (m(tau) + sqrt(v(tau)) .* e),  v = 1 / (lambda + tau^-2),  m = v .* kappa,
// the mean and variance of b given tau under a Normal likelihood of precision
// Q diag(lambda) Q' whose linear term is Q kappa (both data, taken from the Hessian at the
// non-centred mode). For every tau, e is then close to N(0, I): non-centred where tau^-2
// dominates lambda (weak data or small tau), centred where lambda dominates. The prior of b
// is unchanged (an exact change of variables, its log Jacobian sum(log v) / 2 added); with
// lambda = 0 and kappa = 0 it is the plain non-centred b = tau e.
// Group offsets (a class-reduced transducer's pairs; docs/model.md, "Many classes"). With
// G > 0, each row belongs to one of G groups, each group to one of H parents, and the
// class log-odds of a group's rows are shifted by a constant per group and class:
//   p(c, y | g) proportional to sum_k beta[k, c] kernel_k(y) * exp(off[g, c]),  off[g, 1] = 0,
//   off[g, c] = tau_h[c] e_h[parent[g], c] + tau_g[c] e_g[g, c],  e ~ N(0, 1),
//   tau_h, tau_g ~ N+(0, tau_g_scale),
// a two-level hierarchy shrunk towards no offset (the model above). Conditioning on the
// group (its frequency a separate parameter, whose posterior the rest does not touch) keeps
// the model a finite mixture of product kernels: a component per kernel and group, whose
// kernel in the group's coordinate is an indicator. Appended to u after the log-odds'
// blocks: (log tau, z, e_h, e_g), matrices column-major, where the two scales are
// sampled in polar form (group_log_scales): tau_h = tau sqrt(rho), tau_g =
// tau sqrt(1 - rho), rho = inv_logit(z). Under the half-Normal pair above, tau is
// tau_g_scale times a chi with 2 degrees of freedom and rho ~ Beta(1/2, 1/2), independent;
// (log tau, z) -> (log tau_h, log tau_g) has the constant Jacobian 1/2, so the prior
// written in log tau_h, log tau_g is unchanged. Where each parent has one group (every
// top class with one observed pair, as one-hot outputs give) the data inform only
// tau_h^2 + tau_g^2 = tau^2: an L-shaped ridge in (log tau_h, log tau_g) that a diagonal
// or dense metric cannot follow, a product of tau's posterior and rho's prior here
// (docs/model.md, "Pair offsets"). The offsets are
// conditionally whitened as the smooth blocks are, with each group's likelihood precision
// lambda[g, c] and linear term kappa[g, c] for its offset (data; 0 and 0 give the plain
// non-centred form above). Per column c, writing off = h[parent] + b:
//   parents: h = v_h .* sum_{g in p} kappa_g / A_g + sqrt(v_h) .* e_h,
//            v_h = 1 / (sum_{g in p} lambda_g / A_g + tau_h^-2),  A_g = 1 + lambda_g tau_g^2,
//   groups:  b = v_g .* (kappa - lambda .* h[parent]) + sqrt(v_g) .* e_g,
//            v_g = 1 / (lambda + tau_g^-2),
// the mean and variance of h given the scales under the groups' Normal likelihoods with
// each child's b integrated out, then of b given h. The prior h ~ N(0, tau_h^2),
// b ~ N(0, tau_g^2) is unchanged (an exact change of variables; the log Jacobian of
// (e_h, e_g) -> (h, b) is sum(log v) / 2).
// Local smoothing scales (docs/model.md, "Local smoothing scales"). With J > 0 the class
// log-odds gain J blocks per class, each with a smoothing scale of its own, so that the
// smoothness may vary along the grid:
//   f_c += sum_j local_basis_j * b_jc,  b_jc ~ N(0, tau_l[j, c]^2 I),  tau_l ~ N+(0, tau_l_scale)
//   (or, with tau_l_df > 0, half-Student-t(tau_l_df, 0, tau_l_scale)),
// local_basis_j (K x M) the random walk's M smoothest functions under a bump at the j-th
// of J points of the grid (yieldwise/transducer/stan_data.py, local_basis). Each block is
// conditionally whitened as the smooth blocks are (white_l, white_l_lambda, white_l_kappa)
// and appended to u after everything above: (log tau_l, e_l), tau_l as a J x (C - 1)
// matrix and e_l as M x (J (C - 1)), column (c - 1) J + j block j of class c, both
// column-major. Still a finite mixture of the same kernels (theory 3.1): only the prior of
// f_c changes. With J = 0 it is the model above.
functions {
  // u = centre + Q (axes .* z), Q = I + left * right_t (header, "Geometry")
  vector preconditioned(vector z, vector centre, vector axes, matrix left, matrix right_t) {
    vector[rows(z)] x = axes .* z;
    return centre + x + left * (right_t * x);
  }

  // the group offsets' log scales (header, "Group offsets"): row 1 log tau_h, row 2
  // log tau_g, from u's (log tau, z) after position at_g
  matrix group_log_scales(vector u, int at_g, int C1) {
    row_vector[C1] log_tau = segment(u, at_g + 1, C1)';
    row_vector[C1] z = segment(u, at_g + C1 + 1, C1)';
    return append_row(log_tau + 0.5 * log_inv_logit(z), log_tau + 0.5 * log1m_inv_logit(z));
  }

  // the group block's h (H x C1, rows 1..H), b (G x C1, rows H + 1..H + G) and their
  // conditional variances v_h, v_g (the next H and G rows) from u's group block, which
  // starts after position at_g (header, "Group offsets")
  matrix group_blocks(vector u, int at_g, int G, int H, int C1, array[] int parent,
                      matrix lambda, matrix kappa) {
    matrix[2, C1] log_scales = group_log_scales(u, at_g, C1);
    row_vector[C1] tau_h2 = exp(2 * log_scales[1]);
    row_vector[C1] tau_g2 = exp(2 * log_scales[2]);
    matrix[H, C1] e_h = to_matrix(segment(u, at_g + 2 * C1 + 1, H * C1), H, C1);
    matrix[G, C1] e_g = to_matrix(segment(u, at_g + 2 * C1 + H * C1 + 1, G * C1), G, C1);
    matrix[G, C1] inv_a = inv(1 + lambda .* rep_matrix(tau_g2, G));
    matrix[H, C1] precision_h = rep_matrix(inv(tau_h2), H);
    matrix[H, C1] linear_h = rep_matrix(0, H, C1);
    for (g in 1:G) {
      precision_h[parent[g]] += lambda[g] .* inv_a[g];
      linear_h[parent[g]] += kappa[g] .* inv_a[g];
    }
    matrix[H, C1] v_h = inv(precision_h);
    matrix[H, C1] h = v_h .* linear_h + sqrt(v_h) .* e_h;
    matrix[G, C1] v_g = inv(lambda + rep_matrix(inv(tau_g2), G));
    matrix[G, C1] b = v_g .* (kappa - lambda .* h[parent]) + sqrt(v_g) .* e_g;
    return append_row(append_row(h, b), append_row(v_h, v_g));
  }

  // the groups' class offsets (G x C, column 1 zero) from group_blocks
  matrix group_offsets(matrix blocks, int G, int H, array[] int parent) {
    return append_col(rep_vector(0, G), blocks[parent] + blocks[(H + 1):(H + G)]);
  }

  // the same, adding to the target the prior h ~ N(0, tau_h^2), b ~ N(0, tau_g^2) and
  // the log Jacobian of (e_h, e_g) -> (h, b) (header, "Group offsets")
  matrix group_offsets_lp(vector u, int at_g, int G, int H, int C1, array[] int parent,
                          matrix lambda, matrix kappa) {
    matrix[2 * (H + G), C1] blocks = group_blocks(u, at_g, G, H, C1, parent, lambda, kappa);
    matrix[2, C1] log_scales = group_log_scales(u, at_g, C1);
    row_vector[C1] log_tau_h = log_scales[1];
    row_vector[C1] log_tau_g = log_scales[2];
    target += -0.5 * dot_product(columns_dot_self(blocks[1:H]), exp(-2 * log_tau_h))
              - 0.5 * dot_product(columns_dot_self(blocks[(H + 1):(H + G)]), exp(-2 * log_tau_g))
              - H * sum(log_tau_h) - G * sum(log_tau_g)
              + 0.5 * sum(log(blocks[(H + G + 1):(2 * (H + G))]));
    return group_offsets(blocks, G, H, parent);
  }

  // log of each group's normaliser, log sum_c exp(off[g, c]) sum_k exp(theta[k, c])
  vector group_log_norm(matrix theta, matrix off) {
    int C = cols(theta);
    int G = rows(off);
    row_vector[C] col_lse;
    vector[G] out;
    for (c in 1:C) {
      col_lse[c] = log_sum_exp(theta[:, c]);
    }
    for (g in 1:G) {
      out[g] = log_sum_exp(col_lse + off[g]);
    }
    return out;
  }

  // v = 1 / (lambda + tau^-2), the smooth blocks' conditional variances given their log
  // scales (conditional whitening, above), one column per block
  matrix whitening_variance(row_vector log_tau, matrix lambda) {
    return inv(lambda + rep_matrix(exp(-2 * log_tau), rows(lambda)));
  }

  // The smooth blocks' rotated coefficients tilde = v .* kappa + sqrt(v) .* e (b = Q *
  // tilde), one column per block with its own log scale; adds to the target the prior
  // b ~ N(0, tau^2 I), whose |b| = |tilde| (Q orthogonal), and the log Jacobian of
  // e -> tilde.
  matrix whitened_lp(matrix e, row_vector log_tau, matrix lambda, matrix kappa) {
    int R = rows(e);
    matrix[R, cols(e)] v = whitening_variance(log_tau, lambda);
    matrix[R, cols(e)] tilde = v .* kappa + sqrt(v) .* e;
    target += -0.5 * dot_product(columns_dot_self(tilde), exp(-2 * log_tau))
              - R * sum(log_tau) + 0.5 * sum(log(v));
    return tilde;
  }

  // the smooth blocks' sampled coordinates e (R x C) in u: column 1 the density's a_raw
  // (after a_fixed and log tau_a), then the log-odds' f_raw (after a_raw, f_fixed and
  // log tau_f), as the header's u lists them
  matrix smooth_e(vector u, int P, int R, int C) {
    int C1 = C - 1;
    if (R == 0) {  // no smooth part (few distinct outputs): segment's start would pass U
      return rep_matrix(0, 0, C);
    }
    return append_col(segment(u, P + 1, R),
                      to_matrix(segment(u, P + R + P * C1 + C1 + 1, R * C1), R, C1));
  }

  // the local blocks' sampled coordinates e_l (M x J (C - 1)), after position at_l + J C1
  matrix local_e(vector u, int at_l, int J, int M, int C1) {
    return to_matrix(segment(u, at_l + J * C1 + 1, M * J * C1), M, J * C1);
  }

  // the local blocks' share of the class log-odds (K x (C - 1)) from their rotated
  // coefficients tilde (M x J (C - 1)) and each class's basis with its rotations folded in
  matrix local_odds(matrix tilde, array[] matrix local_f, int J, int M) {
    int C1 = size(local_f);
    matrix[rows(local_f[1]), C1] out;
    for (c in 1:C1) {
      out[:, c] = local_f[c] * to_vector(block(tilde, 1, (c - 1) * J + 1, M, J));
    }
    return out;
  }

  // the same tilde without the prior, for generated quantities
  matrix whitened(matrix e, row_vector log_tau, matrix lambda, matrix kappa) {
    matrix[rows(e), cols(e)] v = whitening_variance(log_tau, lambda);
    return v .* kappa + sqrt(v) .* e;
  }

  // theta = log beta up to its normaliser (K x C; the header's a and f_c) from u and the
  // smooth blocks' tilde: column 1 the density a, column c + 1 a + f_c
  matrix theta_of(vector u, matrix tilde, matrix fixed_basis, matrix smooth_a,
                  array[] matrix smooth_f, matrix odds_offset, int density_marginal) {
    int K = rows(fixed_basis);
    int P = cols(fixed_basis);
    int R = rows(tilde);
    int C = cols(tilde);
    int C1 = C - 1;
    vector[K] a = smooth_a * tilde[:, 1];
    if (P > 1) {
      a += fixed_basis[:, 2:P] * segment(u, 1, P - 1);
    }
    // f_fixed starts after a_fixed, log tau_a and a_raw: at P + R + 1
    matrix[P, C1] f_fixed = to_matrix(segment(u, P + R + 1, P * C1), P, C1);
    matrix[K, C] theta = rep_matrix(a, C);
    theta[:, 2:C] += fixed_basis * f_fixed + odds_offset;
    for (c in 1:C1) {
      theta[:, c + 1] += smooth_f[c] * tilde[:, c + 1];
    }
    // density_marginal = 1: theta[k, c] = a[k] + log softmax(0, f[k])[c], so that a is the
    // log-density of all outputs at kernel k rather than the first class's log weight
    // (docs/model.md, "The density block")
    if (density_marginal) {
      for (k in 1:K) {
        theta[k] -= log_sum_exp(theta[k]) - a[k];
      }
    }
    return theta;
  }
}

data {
  int<lower=1> N;                            // distinct calibration rows, sorted by class
  int<lower=2> C;                            // classes
  int<lower=1> D;                            // output dimensions (model scale)
  int<lower=1> K;                            // kernels (mixture components)
  array[N] int<lower=1, upper=C> cls;        // class of each row (1-based, non-decreasing)
  array[N] int<lower=1> count;               // items sharing the row
  matrix<lower=0, upper=1>[N, K] kern;       // kernel values, each row divided by its largest
  vector[N] kern_log_scale;                  // log of that largest value (log-lik constant)
  matrix[K, D] loc;                          // kernel centres (reported as mu)
  matrix<lower=0>[K, D] width;               // kernel widths (reported as sigma)
  int<lower=1> P;                            // fixed-effect functions (column 1: constant)
  matrix[K, P] fixed_basis;
  vector<lower=0>[P] fixed_scale;            // prior sd of each fixed-effect coefficient
  int<lower=0> R;                            // smooth (penalised) functions
  matrix[K, R] smooth_basis;
  real<lower=0> tau_a_scale;                 // half-Normal scale of the density's smoothness
  real<lower=0> tau_f_scale;                 // half-Student-t scale of the log-odds' smoothness
  real<lower=0> tau_f_df;                    // ... and its degrees of freedom (0: half-Normal)
  real<lower=0> tau_f_floor;                 // soft floor under tau_f (0: none), below
  int<lower=0, upper=1> density_marginal;    // 1: a is all outputs' log-density (below)
  int<lower=1> U;                            // = (P - 1) + 1 + R + (C - 1) * (P + 1 + R)
  vector[U] u_centre;                        // preconditioning (header, "Geometry"):
  int<lower=0, upper=U> u_rank;              // u = u_centre + Q (u_axes .* z),
  vector<lower=0>[U] u_axes;                 // Q = I + u_left * u_right'
  matrix[U, u_rank] u_left;
  matrix[U, u_rank] u_right;
  // conditional whitening of the smooth blocks (above): rotation, precision, linear term
  matrix[R, R] white_a;
  vector<lower=0>[R] white_a_lambda;
  vector[R] white_a_kappa;
  array[C - 1] matrix[R, R] white_f;
  matrix<lower=0>[R, C - 1] white_f_lambda;
  matrix[R, C - 1] white_f_kappa;
  // the likelihood's sparse form (below, model block): kern with every value below
  // kernel_tail_cut of its row's largest left out, as a compressed-row matrix of N rows by
  // K * C columns whose row n holds its values at columns (cls[n] - 1) * K + k, so that one
  // product with beta's columns stacked gives every row's likelihood; kern_sparse = 0
  // keeps the dense product (kern_nz = 0)
  int<lower=0, upper=1> kern_sparse;
  int<lower=0> kern_nz;
  vector<lower=0, upper=1>[kern_nz] kern_w;
  array[kern_nz] int<lower=1, upper=K * C> kern_v;
  array[N + 1] int<lower=1> kern_u;
  // group offsets (header): G groups (0: none), H parents, each row's group (0 when
  // G = 0), each group's parent, and the half-Normal scale of both levels' sds
  int<lower=0> G;
  int<lower=0> H;
  array[N] int<lower=0, upper=G> grp;
  array[G] int<lower=1, upper=H> parent;
  real<lower=0> tau_g_scale;
  // the group offsets' conditional whitening (header): each group's likelihood precision
  // and linear term per class column (0 and 0: the plain non-centred offsets)
  matrix<lower=0>[G, C - 1] white_g_lambda;
  matrix[G, C - 1] white_g_kappa;
  // a candidate, off by default (0; docs/model.md, "A ridge on the log-odds' levels"):
  // the class log-odds at every kernel, f_c[k] = theta[k, c] - theta[k, 1], given a
  // Normal(0, level_scale) factor besides their smoothness prior
  real<lower=0> level_scale;
  // the class log-odds' prior mean and the prior of their fixed part (docs/model.md,
  // "A prior centred on the classifier's own probabilities"): f_c = odds_offset[:, c] +
  // fixed_basis * f_fixed[:, c] + ..., f_fixed[p, c] ~ Normal(0, odds_scale[p]) or, with
  // odds_df > 0, Student-t(odds_df, 0, odds_scale[p]). The default (offset 0, odds_scale =
  // fixed_scale, odds_df = 0) is the model of the header.
  vector<lower=0>[P] odds_scale;
  real<lower=0> odds_df;
  matrix[K, C - 1] odds_offset;
  // local smoothing scales (header): J blocks per class column (0: none) of M functions,
  // their basis (block j in columns (j - 1) M + 1 .. j M), the half-Normal scale of their
  // sds, and their conditional whitening per class: a block-diagonal rotation, and each
  // block's likelihood precision and linear term in column (c - 1) J + j
  int<lower=0> J;
  int<lower=0> M;
  matrix[K, J * M] local_basis;
  real<lower=0> tau_l_scale;
  real<lower=0> tau_l_df;                    // their half-Student-t's df (0: half-Normal)
  array[C - 1] matrix[J * M, J * M] white_l;
  matrix<lower=0>[M, J * (C - 1)] white_l_lambda;
  matrix[M, J * (C - 1)] white_l_kappa;
}

transformed data {
  vector[N] count_vec = to_vector(count);
  real log_lik_constant = dot_product(count_vec, kern_log_scale);
  // the rows of class c are first[c]:last[c] (rows are sorted by class; a class with no
  // rows has last = first - 1), so the likelihood needs only each row's own class's
  // column of kern * beta
  array[C] int first;
  array[C] int last;
  {
    array[C] int rows_of = rep_array(0, C);
    for (n in 1:N) {
      if (n > 1 && cls[n] < cls[n - 1]) {
        reject("cls must be sorted (non-decreasing); row ", n, " has class ", cls[n],
               " after ", cls[n - 1]);
      }
      rows_of[cls[n]] += 1;
    }
    int start = 1;
    for (c in 1:C) {
      first[c] = start;
      last[c] = start + rows_of[c] - 1;
      start += rows_of[c];
    }
  }
  int P1 = P - 1;
  int C1 = C - 1;
  // where each block starts in u
  int at_f = P1 + 1 + R;
  int at_g = at_f + C1 * (P + 1 + R);  // the group block, after the log-odds'
  int n_group = G > 0 ? C1 * (2 + H + G) : 0;
  int at_l = at_g + n_group;  // the local blocks, after the groups'
  if (U != at_l + J * C1 * (1 + M)) {
    reject("U must be (P - 1) + 1 + R + (C - 1) * (P + 1 + R) + [G > 0] (C - 1) (2 + H + G) ",
           "+ J (C - 1) (1 + M) = ", at_l + J * C1 * (1 + M), ", found ", U);
  }
  if (G > 0 && H < 1) {
    reject("groups need at least one parent: H = ", H);
  }
  // each row's offset in to_vector(off) (column-major): (cls - 1) * G + grp
  array[N] int off_index = rep_array(1, N);
  if (G > 0) {
    for (n in 1:N) {
      if (grp[n] < 1) {
        reject("grp[", n, "] must lie in 1..G = ", G, ", found ", grp[n]);
      }
      off_index[n] = (cls[n] - 1) * G + grp[n];
    }
  }
  vector[P * C1] f_fixed_scale = to_vector(rep_matrix(odds_scale, C1));
  // each smooth block's basis with its whitening rotation folded in (one K x R product
  // per block instead of an R x R and a K x R one)
  matrix[K, R] smooth_a = smooth_basis * white_a;
  array[C1] matrix[K, R] smooth_f;
  for (c in 1:C1) {
    smooth_f[c] = smooth_basis * white_f[c];
  }
  matrix[R, C] white_lambda = append_col(white_a_lambda, white_f_lambda);
  matrix[R, C] white_kappa = append_col(white_a_kappa, white_f_kappa);
  // each class's local basis with its whitening rotations folded in (header)
  array[C1] matrix[K, J * M] local_f;
  for (c in 1:C1) {
    local_f[c] = local_basis * white_l[c];
  }
  matrix[u_rank, U] u_right_t = u_right';  // the preconditioning's (header, "Geometry")
  if (kern_sparse && (kern_u[1] != 1 || kern_u[N + 1] != kern_nz + 1)) {
    reject("kern_u must run from 1 to kern_nz + 1 = ", kern_nz + 1, ", found ", kern_u[1],
           " to ", kern_u[N + 1]);
  }
}

parameters {
  vector[U] z;
}

// No transformed parameters: u, the scales and theta are the model block's locals and are
// computed again in generated quantities, so that each draw writes z and what the
// transducer reads (w, alpha, tau_a, tau_f, log_lik, log_lik_cut_gap): about a third of the
// values a draw wrote before (docs/model.md, "Where the time goes").
model {
  vector[U] u = preconditioned(z, u_centre, u_axes, u_left, u_right_t);
  real tau_a = exp(u[P1 + 1]);
  vector[C1] tau_f = exp(segment(u, at_f + P * C1 + 1, C1));
  // the smooth blocks, column 1 the density's, then the log-odds' (their prior is added
  // here, with the whitening's Jacobian)
  matrix[R, C] tilde = whitened_lp(smooth_e(u, P, R, C), append_col(u[P1 + 1], log(tau_f')),
                                   white_lambda, white_kappa);
  // the local blocks' share of the log-odds (header, "Local smoothing scales"), their prior
  // added with the whitening's Jacobian; the scales' half-Normal on the log scale
  matrix[K, C1] odds = odds_offset;
  if (J > 0) {
    vector[J * C1] log_tau_l = segment(u, at_l + 1, J * C1);
    odds += local_odds(whitened_lp(local_e(u, at_l, J, M, C1), log_tau_l', white_l_lambda,
                                   white_l_kappa), local_f, J, M);
    if (tau_l_df > 0) {
      exp(log_tau_l) ~ student_t(tau_l_df, 0, tau_l_scale);
    } else {
      exp(log_tau_l) ~ normal(0, tau_l_scale);
    }
    target += sum(log_tau_l);
  }
  // log beta, up to the normalising constant: K x C
  matrix[K, C] theta = theta_of(u, tilde, fixed_basis, smooth_a, smooth_f, odds,
                                   density_marginal);
  segment(u, 1, P1) ~ normal(0, fixed_scale[2:P]);
  if (odds_df > 0) {
    segment(u, at_f + 1, P * C1) ~ student_t(odds_df, 0, f_fixed_scale);
  } else {
    segment(u, at_f + 1, P * C1) ~ normal(0, f_fixed_scale);
  }
  if (level_scale > 0) {
    to_vector(block(theta, 1, 2, K, C1) - rep_matrix(col(theta, 1), C1)) ~ normal(0, level_scale);
  }
  // half-Normal and half-Student-t scales sampled on the log scale: the density times
  // its Jacobian tau
  tau_a ~ normal(0, tau_a_scale);
  if (tau_f_df > 0) {
    tau_f ~ student_t(tau_f_df, 0, tau_f_scale);
  } else {
    tau_f ~ normal(0, tau_f_scale);
  }
  target += u[P1 + 1] + sum(segment(u, at_f + P * C1 + 1, C1));
  // the soft floor: tau_f's density times 1 - exp(-(tau_f / floor)^2), about
  // (tau_f / floor)^2 below the floor, keeps the sampler out of the funnel's neck
  if (tau_f_floor > 0) {
    target += sum(log1m_exp(-square(tau_f / tau_f_floor)));
  }
  // the group offsets' scales: half-Normal on the log scale, with their Jacobian, written
  // in log tau_h, log tau_g (the polar coordinates' Jacobian is constant: header, "Group
  // offsets"; the offsets' own prior is added with the likelihood, by group_offsets_lp)
  if (G > 0) {
    vector[2 * C1] log_scales = to_vector(group_log_scales(u, at_g, C1));
    exp(log_scales) ~ normal(0, tau_g_scale);
    target += sum(log_scales);
  }
  {
    // beta = exp(theta - log_norm): the likelihood of the rows of class c is their block
    // of kern times column c of beta (C products of (rows of c) x K by K, together one
    // N x K by K product), each column shifted by its largest theta so that nothing
    // overflows. The sparse form makes the same sums over the kernel values kept
    // (docs/model.md, "The likelihood's sparse form"): on a 2-D grid about a quarter.
    real log_norm = log_sum_exp(theta);
    row_vector[C] top;
    vector[N] lik;
    for (c in 1:C) {
      top[c] = max(theta[:, c]);
    }
    if (kern_sparse) {
      lik = csr_matrix_times_vector(N, K * C, kern_w, kern_v, kern_u,
                                    to_vector(exp(theta - rep_matrix(top, K))));
    } else {
      for (c in 1:C) {
        if (last[c] >= first[c]) {
          lik[first[c]:last[c]] = kern[first[c]:last[c]] * exp(theta[:, c] - top[c]);
        }
      }
    }
    if (G > 0) {  // each row's class offset, and its group's normaliser
      matrix[G, C] off = group_offsets_lp(u, at_g, G, H, C1, parent, white_g_lambda,
                                          white_g_kappa);
      target += dot_product(count_vec, log(lik) + top[cls]' + to_vector(off)[off_index]
                                       - group_log_norm(theta, off)[grp]);
    } else {
      target += dot_product(count_vec, log(lik) + top[cls]' - log_norm);
    }
  }
}

generated quantities {
  // the mixture in the form every formula of theory 3.2 reads (docs/model.md):
  // w_k = sum_c beta[k, c], alpha_k = beta[k, ] / w_k; mu = loc and sigma = width, the
  // same at every draw, are not written: the draws take them from the data
  // (yieldwise.transducer.stan_data.with_kernels)
  real<lower=0> tau_a;
  vector<lower=0>[C1] tau_f;
  vector[K] w;
  array[K] vector[C] alpha;
  real log_lik;
  // how much the kernel values the sparse form leaves out add to log_lik (0 when dense):
  // the draws' density under the full kernels is theirs times exp(log_lik_cut_gap)
  real log_lik_cut_gap = 0;
  // the group offsets (header; G = 0: none): p(c, y | g) is the mixture's joint times
  // exp(group_offset[g, c]), renormalised
  matrix[G, C] group_offset;
  {
    vector[U] u = preconditioned(z, u_centre, u_axes, u_left, u_right_t);
    tau_a = exp(u[P1 + 1]);
    tau_f = exp(segment(u, at_f + P * C1 + 1, C1));
    matrix[R, C] tilde = whitened(smooth_e(u, P, R, C), append_col(u[P1 + 1], log(tau_f')),
                                  white_lambda, white_kappa);
    matrix[K, C1] odds = odds_offset;
    if (J > 0) {
      odds += local_odds(whitened(local_e(u, at_l, J, M, C1), segment(u, at_l + 1, J * C1)',
                                  white_l_lambda, white_l_kappa), local_f, J, M);
    }
    matrix[K, C] theta = theta_of(u, tilde, fixed_basis, smooth_a, smooth_f, odds,
                                   density_marginal);
    real log_norm = log_sum_exp(theta);
    for (k in 1:K) {
      real row_norm = log_sum_exp(theta[k]);
      w[k] = exp(row_norm - log_norm);
      alpha[k] = softmax(theta[k]');
    }
    // every row's likelihood under its own class's column (the full kernels), each column
    // shifted by its largest theta as in the model block: beta = exp(theta - log_norm)
    // itself underflows where a class's weights lie ~745 below the largest, which made
    // log_lik -inf in such a draw
    row_vector[C] top;
    for (c in 1:C) {
      top[c] = max(theta[:, c]);
    }
    matrix[K, C] shifted = exp(theta - rep_matrix(top, K));
    vector[N] lik;
    for (c in 1:C) {
      if (last[c] >= first[c]) {
        lik[first[c]:last[c]] = kern[first[c]:last[c]] * shifted[:, c];
      }
    }
    log_lik = log_lik_constant + dot_product(count_vec, log(lik) + top[cls]' - log_norm);
    if (G > 0) {
      group_offset = group_offsets(group_blocks(u, at_g, G, H, C1, parent, white_g_lambda,
                                                white_g_kappa), G, H, parent);
      log_lik += dot_product(count_vec, to_vector(group_offset)[off_index] + log_norm
                                        - group_log_norm(theta, group_offset)[grp]);
    }
    if (kern_sparse) {
      log_lik_cut_gap = dot_product(
        count_vec, log(lik) - log(csr_matrix_times_vector(N, K * C, kern_w, kern_v, kern_u,
                                                          to_vector(shifted))));
    }
  }
}
