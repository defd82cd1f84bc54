// Probability transducer (docs/theory.md section 3; design notes in docs/model.md).
//
// Finite mixture of product kernels for the pair (class c, output y in R^D):
//   F(c, y) = sum_k w_k Cat(c | alpha_k) prod_d kernel_kd(y_d)
// with the component indicators summed out. kernel_kd is
//   * the Normal(mu_kd, sigma_kd) density of y_d for a point-valued dimension, or
//   * the Normal(mu_kd, sigma_kd) probability of the bin [lower_d, upper_d] for an
//     interval-censored dimension (outputs recorded at a finite resolution, e.g. vote
//     fractions k/200 on the logit scale: the bin of an exact 0 reaches -infinity).
// Identical calibration rows arrive merged, each with its count. Infinite bin edges
// arrive as large finite sentinels (see yieldwise/_stan_data.py); they behave exactly
// like infinities here because the Normal tail beyond them is below double precision.
//
// The log-likelihood takes one of three exact routes, chosen from the data, each written
// so that the autodiff tape holds few nodes (docs/model.md has the measurements):
//   * only point-valued dimensions: the Gaussian log-kernels are a quadratic in y, so the
//     N x K matrix of component log-joints is one data-by-parameter product, and the
//     log-sum-exp over components is categorical_logit_glm (one node, analytic gradient);
//   * one censored dimension whose bins do not overlap (a lattice): the normal tail is
//     evaluated once per distinct edge and component; consecutive edges delimit
//     intervals, and the likelihood is a sum over (interval, class) cells with counts;
//   * anything else (several dimensions, some censored): per row, on the linear scale.
// The two censored routes fall back to a floored log-scale sum when a likelihood term
// underflows, so the result is exact either way.
//
// Parameterisation (all chosen for HMC, see docs/model.md):
//   * weights w = softmax(eta), eta_k ~ Normal(0, eta_scale): a logistic-normal prior,
//     smooth in the unconstrained space, no mass piled on the simplex boundary;
//   * mu = mu_loc + mu_scale * mu_raw, mu_raw ~ Normal(0, 1), with mu_scale half the
//     data's half-range by default: locations stay a priori inside the data, which
//     keeps a component from roaming the flat inside of an open-ended bin;
//   * sigma = exp(log_sigma_loc + log_sigma_scale * sigma_raw), sigma_raw ~ Normal(0, 1):
//     a log-normal kernel-width prior, which vanishes at zero faster than any power of
//     sigma (so no kernel can collapse onto a repeated value) and at infinity;
//   * alpha_k ~ Dirichlet(alpha_conc).
// Component labels are exchangeable (label switching leaves every invariant quantity
// unchanged); yieldwise/_stan_data.py: initial_values starts all chains on the data.
functions {
  // Number of entries of the sorted vector v below x (or_equal = 0) or not above x
  // (or_equal = 1). A binary search on values: it adds nothing to the autodiff tape.
  // For an entry x of v, n_below(v, x, 0) + 1 is its position.
  int n_below(vector v, real x, int or_equal) {
    int lo = 0;
    int hi = rows(v);
    while (lo < hi) {
      int mid = (lo + hi + 1) %/% 2;
      if (v[mid] < x || (or_equal && v[mid] == x)) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    return lo;
  }

  // Signs of u = (mu_k - e) / (sqrt2 sigma_k) over the sorted edges e, as data (E x K):
  // +1 for the first cuts[1, k] edges (those below mu_k), 0 for edges equal to mu_k, -1
  // for the rest (cuts[2, k] edges are <= mu_k). Piecewise constant, so no derivative is lost.
  matrix edge_signs(array[,] int cuts, int E) {
    int K = size(cuts[1]);
    matrix[E, K] rank = rep_matrix(linspaced_vector(E, 1, E), K);
    return fmin(fmax(rep_matrix(to_row_vector(cuts[1]), E) - rank + 1, 0), 1)
           - fmin(fmax(rank - rep_matrix(to_row_vector(cuts[2]), E), 0), 1);
  }

  // g = s erfc(|u|) at every edge (E x K), from g = s .* erfc(s .* u). For an edge
  // left of mu (s = 1) g is 2 Phi(z), for one right of mu (s = -1) it is 2 (Phi(z) - 1),
  // z = (e - mu) / sigma: always a tail, accurate far out. Then for a bin [a, b]
  //   2 P([a, b]) = (g_b - g_a) + (s_a - s_b),
  // where the second term is exactly 0 when both edges lie on one side of mu (the
  // difference of two tails keeps full relative precision) and 2 when the bin straddles
  // mu. An edge exactly at mu has s = 0 and g = 0, which the formula also gets right.
  // Only the elementwise erfc puts one autodiff node per element on the tape.
  matrix edge_tails(matrix u, data matrix s) {
    return s .* erfc(s .* u);
  }

  // Standardised edges u = (mu_k - e) / (sqrt2 sigma_k) (E x K) of one censored
  // dimension: one data-by-parameter product.
  matrix standardised_edges(vector edges, vector mu, vector sigma) {
    int E = rows(edges);
    matrix[2, rows(mu)] scale;
    scale[1] = -inv(sqrt2() * sigma)';
    scale[2] = -mu' .* scale[1];
    return append_col(edges, rep_vector(1, E)) * scale;
  }

  // For each component k: how many edges lie below mu_k, and how many not above it.
  array[,] int sign_cuts(vector edges, vector mu) {
    int K = rows(mu);
    array[2, K] int cuts;
    for (k in 1:K) {
      cuts[1, k] = n_below(edges, mu[k], 0);
      cuts[2, k] = n_below(edges, mu[k], 1);
    }
    return cuts;
  }

  // 2 P(bin) of every row's bin under every component (N x K, linear scale).
  matrix twice_bin_prob(vector edges, array[] int lo_idx, array[] int hi_idx,
                        vector mu, vector sigma) {
    return twice_bin_prob_signed(standardised_edges(edges, mu, sigma),
                                 edge_signs(sign_cuts(edges, mu), rows(edges)), lo_idx, hi_idx);
  }

  matrix twice_bin_prob_signed(matrix u, data matrix s, array[] int lo_idx,
                               array[] int hi_idx) {
    matrix[rows(u), cols(u)] g = edge_tails(u, s);
    return (g[hi_idx] - g[lo_idx]) + (s[lo_idx] - s[hi_idx]);
  }

  // One censored dimension on a lattice: the E - 1 intervals between consecutive
  // edges tile the line, every row's bin is one of them, and cell_count[i, c] holds how
  // many items of class c fall in interval i. The log-likelihood is
  // sum_{i, c} cell_count[i, c] log sum_k P_k(interval i) w_k alpha_kc: one (E - 1) x K
  // by K x C product. Empty cells get 1 added inside the log (times a zero count) so
  // that an underflow there cannot produce 0 * log(0).
  real interval_log_lik(vector edges, data matrix cell_count, data matrix empty, vector w,
                        matrix alpha_mat, vector mu, vector sigma) {
    return interval_log_lik_signed(standardised_edges(edges, mu, sigma),
                                   edge_signs(sign_cuts(edges, mu), rows(edges)), cell_count,
                                   empty, w, alpha_mat);
  }

  real interval_log_lik_signed(matrix u, data matrix s, data matrix cell_count,
                               data matrix empty, vector w, matrix alpha_mat) {
    int E = rows(u);
    int K = cols(u);
    int C = cols(alpha_mat);
    matrix[E, K] g = edge_tails(u, s);
    // twice_bin_prob_signed with lo = 1..E-1, hi = 2..E, written with contiguous blocks:
    // multi-indexing copies and range-checks every element, blocks do not.
    matrix[E - 1, K] twice_p = (g[2:E] - g[1:(E - 1)]) + (s[1:(E - 1)] - s[2:E]);
    matrix[E - 1, C] cell = twice_p * (rep_matrix(0.5 * w, C) .* alpha_mat);
    if (min(cell + 1e300 * empty) > 1e-300) {
      return sum(cell_count .* log(cell + empty));
    }
    // Fallback (an occupied cell underflowed): log scale, interval probabilities floored.
    matrix[E - 1, K] lp = log(fmax(twice_p, 2e-300)) + rep_matrix(log(0.5 * w)', E - 1);
    matrix[K, C] log_alpha = log(alpha_mat);
    real total = 0;
    for (i in 1:(E - 1)) {
      for (c in 1:C) {
        if (cell_count[i, c] > 0) {
          total += cell_count[i, c] * log_sum_exp(lp[i] + log_alpha[:, c]');
        }
      }
    }
    return total;
  }

  // (2 Dp + C) x K parameter matrix theta such that X * theta, with X = [y^2 | y |
  // one-hot(class)] for the point dimensions, is the N x K matrix of
  // log w_k + log alpha_k[c_n] + sum_{point d} log N(y_nd | mu_kd, sigma_kd) - Dc log 2
  // (the Gaussian log-density is a quadratic in y; the 2 undoes twice_bin_prob's factor).
  matrix point_theta(array[] int pdim, int Dc, vector w, matrix log_alpha, matrix mu,
                     matrix sigma) {
    int K = rows(mu);
    int C = cols(log_alpha);
    int Dp = size(pdim);
    matrix[2 * Dp + C, K] theta;
    row_vector[K] base = log(w)' - 0.5 * Dp * log(2 * pi()) - Dc * log2();
    for (j in 1:Dp) {
      int d = pdim[j];
      row_vector[K] prec = inv_square(sigma[:, d])';
      theta[j] = -0.5 * prec;
      theta[Dp + j] = mu[:, d]' .* prec;
      base -= 0.5 * square(mu[:, d])' .* prec + log(sigma[:, d])';
    }
    for (c in 1:C) {
      theta[2 * Dp + c] = base + log_alpha[:, c]';
    }
    return theta;
  }

  // sum_n count_n log sum_k exp(lp[n, k]) for lp = X * theta. categorical_logit_glm
  // with every outcome 1 is sum_n (lp[n, 1] - log sum_k exp(lp[n, k])), so the mixture
  // term is (column sums of X) * theta[:, 1] minus it. Rows come grouped by count
  // (group g ends at row group_end[g]; usually a single group of 1s).
  real point_log_lik(data matrix X, array[] int group_end, vector group_count,
                     matrix theta) {
    real total = 0;
    int start = 1;
    for (g in 1:size(group_end)) {
      int m = group_end[g] - start + 1;
      total += group_count[g]
               * ((rep_row_vector(1, m) * X[start:group_end[g]]) * theta[:, 1]
                  - categorical_logit_glm_lpmf(rep_array(1, m) | X[start:group_end[g]],
                                               rep_vector(0, cols(theta)), theta));
      start = group_end[g] + 1;
    }
    return total;
  }

  // The general route: per row, on the linear scale (censored kernels multiplied in, the
  // sum over components a product), with the floored log-scale fallback.
  real row_log_lik(data matrix X, array[] int cdim, data matrix edges,
                   array[] int n_edges, array[,] int lo_edge, array[,] int hi_edge,
                   vector count, matrix theta, matrix mu, matrix sigma) {
    int N = rows(X);
    int K = rows(mu);
    int Dc = size(cdim);
    matrix[N, K] bins = rep_matrix(1, N, K);
    for (j in 1:Dc) {
      bins = bins .* twice_bin_prob(edges[1:n_edges[j], j], lo_edge[j], hi_edge[j],
                                    mu[:, cdim[j]], sigma[:, cdim[j]]);
    }
    vector[N] row_sum = (exp(X * theta) .* bins) * rep_vector(1, K);
    if (min(row_sum) > 1e-300 && max(row_sum) < 1e300) {
      return dot_product(count, log(row_sum));
    }
    matrix[N, K] lp = X * theta + log(fmax(bins, 2e-300));
    vector[N] row_lse;
    for (n in 1:N) {
      row_lse[n] = log_sum_exp(lp[n]);
    }
    return dot_product(count, row_lse);
  }

  // sum_n count_n log sum_k w_k alpha_k[c_n] prod_d kernel_kd(row n), by the route the
  // data call for (see the top of this file).
  real mixture_log_lik(int route, data matrix X, array[] int pdim, array[] int cdim,
                       data matrix edges, array[] int n_edges,
                       array[,] int lo_edge, array[,] int hi_edge, data matrix cell_count,
                       data matrix empty, array[] int group_end, vector group_count,
                       vector count, vector w, array[] vector alpha, matrix mu,
                       matrix sigma) {
    int K = rows(mu);
    int C = rows(alpha[1]);
    matrix[K, C] alpha_mat;
    for (k in 1:K) {
      alpha_mat[k] = alpha[k]';
    }
    if (route == 2) {
      return interval_log_lik(edges[1:n_edges[1], 1], cell_count, empty, w, alpha_mat,
                              mu[:, 1], sigma[:, 1]);
    }
    matrix[cols(X), K] theta
      = point_theta(pdim, size(cdim), w, log(alpha_mat), mu, sigma);
    if (route == 1) {
      return point_log_lik(X, group_end, group_count, theta);
    }
    return row_log_lik(X, cdim, edges, n_edges, lo_edge, hi_edge, count, theta, mu,
                       sigma);
  }
}

data {
  int<lower=1> N;                          // distinct calibration rows
  int<lower=2> C;                          // classes
  int<lower=1> D;                          // output dimensions
  int<lower=1> K;                          // mixture components
  array[N] int<lower=1, upper=C> cls;      // class of each row (1-based)
  array[N] int<lower=1> count;             // how many items share the row
  matrix[N, D] y_lower;                    // bin lower edge (point value if not censored)
  matrix[N, D] y_upper;                    // bin upper edge (point value if not censored)
  array[D] int<lower=0, upper=1> censored; // 1: dimension is interval-censored
  // prior hyper-parameters (yieldwise/_stan_data.py: default_prior)
  vector[D] mu_loc;
  vector<lower=0>[D] mu_scale;
  vector[D] log_sigma_loc;
  vector<lower=0>[D] log_sigma_scale;
  real<lower=0> eta_scale;
  real<lower=0> alpha_conc;
}

transformed data {
  int Dc = sum(censored);
  int Dp = D - Dc;
  array[Dp] int pdim;
  array[Dc] int cdim;
  vector[N] count_vec = to_vector(count);
  {
    int jp = 1;
    int jc = 1;
    for (d in 1:D) {
      if (censored[d]) {
        cdim[jc] = d;
        jc += 1;
      } else {
        pdim[jp] = d;
        jp += 1;
      }
    }
  }
  // distinct bin edges of each censored dimension, and each row's two edges among them
  array[Dc] int n_edges;
  matrix[2 * N, Dc] edges = rep_matrix(0, 2 * N, Dc);
  array[Dc, N] int lo_edge;
  array[Dc, N] int hi_edge;
  for (j in 1:Dc) {
    int d = cdim[j];
    vector[2 * N] all = sort_asc(append_row(y_lower[:, d], y_upper[:, d]));
    int m = 1;
    edges[1, j] = all[1];
    for (i in 2:(2 * N)) {
      if (all[i] > edges[m, j]) {
        m += 1;
        edges[m, j] = all[i];
      }
    }
    n_edges[j] = m;
    for (n in 1:N) {
      lo_edge[j, n] = n_below(edges[1:m, j], y_lower[n, d], 0) + 1;
      hi_edge[j, n] = n_below(edges[1:m, j], y_upper[n, d], 0) + 1;
    }
  }
  // Route: 1 point-only, 2 one censored dimension on a lattice, 3 general (see top).
  int route = 3;
  if (Dc == 0) {
    route = 1;
  } else if (D == 1) {
    route = 2;
    for (n in 1:N) {
      if (hi_edge[1, n] != lo_edge[1, n] + 1) {
        route = 3;  // overlapping bins: some edge lies inside another row's bin
      }
    }
  }
  // Route 2: items per (interval between consecutive edges, class).
  int n_intervals = route == 2 ? n_edges[1] - 1 : 0;
  matrix[n_intervals, C] cell_count = rep_matrix(0, n_intervals, C);
  if (route == 2) {
    for (n in 1:N) {
      cell_count[lo_edge[1, n], cls[n]] += count[n];
    }
  }
  matrix[n_intervals, C] empty = rep_matrix(0, n_intervals, C);
  for (i in 1:n_intervals) {
    for (c in 1:C) {
      empty[i, c] = cell_count[i, c] == 0;
    }
  }
  // X = [y^2 | y | one-hot(class)] for the point dimensions; route 1 has its rows
  // sorted by count and grouped (group g ends at row group_end[g]).
  array[N] int order = route == 1 ? sort_indices_asc(count) : linspaced_int_array(N, 1, N);
  int G = 1;
  for (i in 2:N) {
    G += count[order[i]] > count[order[i - 1]];
  }
  array[G] int group_end;
  vector[G] group_count;
  {
    int g = 1;
    for (i in 2:N) {
      if (count[order[i]] > count[order[i - 1]]) {
        group_end[g] = i - 1;
        group_count[g] = count[order[i - 1]];
        g += 1;
      }
    }
    group_end[G] = N;
    group_count[G] = count[order[N]];
  }
  matrix[N, 2 * Dp + C] X = rep_matrix(0, N, 2 * Dp + C);
  for (j in 1:Dp) {
    X[:, j] = square(y_lower[order, pdim[j]]);
    X[:, Dp + j] = y_lower[order, pdim[j]];
  }
  for (i in 1:N) {
    X[i, 2 * Dp + cls[order[i]]] = 1;
  }
}

parameters {
  vector[K] eta;
  array[K] simplex[C] alpha;
  matrix[K, D] mu_raw;
  matrix[K, D] sigma_raw;
}

transformed parameters {
  simplex[K] w = softmax(eta);
  matrix[K, D] mu = rep_matrix(mu_loc', K) + rep_matrix(mu_scale', K) .* mu_raw;
  matrix<lower=0>[K, D] sigma
    = exp(rep_matrix(log_sigma_loc', K) + rep_matrix(log_sigma_scale', K) .* sigma_raw);
}

model {
  eta ~ normal(0, eta_scale);
  for (k in 1:K) {
    alpha[k] ~ dirichlet(rep_vector(alpha_conc, C));
  }
  to_vector(mu_raw) ~ std_normal();
  to_vector(sigma_raw) ~ std_normal();
  target += mixture_log_lik(route, X, pdim, cdim, edges, n_edges, lo_edge, hi_edge,
                            cell_count, empty, group_end, group_count, count_vec, w, alpha,
                            mu, sigma);
}

generated quantities {
  real log_lik = mixture_log_lik(route, X, pdim, cdim, edges, n_edges, lo_edge, hi_edge,
                                 cell_count, empty, group_end, group_count, count_vec, w,
                                 alpha, mu, sigma);
}
