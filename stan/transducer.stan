// Probability transducer (docs/theory.md section 3; design notes in docs/model.md).
//
// Finite mixture of product kernels for the pair (class c, output y in R^D):
//   F(c, y) = sum_k w_k Cat(c | alpha_k) prod_d kernel_kd(y_d)
// with the component indicators summed out. kernel_kd is
//   * the Normal(mu_kd, sigma_kd) density of y_d for a point-valued dimension, or
//   * the Normal(mu_kd, sigma_kd) probability of the bin [lower_d, upper_d] for an
//     interval-censored dimension (outputs recorded at a finite resolution, e.g. vote
//     fractions k/200 on the logit scale: the bin of an exact 0 reaches -infinity).
// Identical calibration rows arrive merged, each with its count. The normal tails of a
// censored dimension are evaluated once per distinct bin edge (adjacent bins share one),
// and the sum over components is a matrix product in linear space: together 25 % less
// time per gradient than per-row bins and a per-row log-sum-exp (docs/model.md). Infinite bin edges
// arrive as large finite sentinels (see yieldwise/_stan_data.py); they behave exactly
// like infinities here because the Normal tail beyond them is below double precision.
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
  // log(Phi(b) - Phi(a)) elementwise for a < b, from ua = -a / sqrt(2), ub = -b / sqrt(2)
  // (so ub < ua). Each interval is reflected onto the side of the origin where it has
  // less mass: both erfc values then lie in erfc's accurate tail, and their difference
  // keeps full relative precision down to the smallest doubles. Probabilities below
  // 1e-300 (a bin more than ~37 kernel widths away) are floored there: such a component
  // contributes nothing next to the others, and the floor keeps gradients finite.
  // Position of x in the sorted vector v (x is one of its entries): binary search.
  int locate(vector v, real x) {
    int lo = 1;
    int hi = rows(v);
    while (lo < hi) {
      int mid = (lo + hi) %/% 2;
      if (v[mid] < x) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  // log(2 P(bin)) of every row's bin under every component, for one censored dimension.
  // Bins tile the line, so adjacent bins share edges: the normal tail is evaluated once
  // per distinct edge (one erfc per edge and component, the costly part), not twice per
  // row. With u = (mu - e) / (sqrt2 sigma) and s = sign(u), g = s erfc(|u|) is 2 Phi(e)
  // left of mu and 2 (Phi(e) - 1) right of it (a tail, accurate far out), so that
  //   2 P([a, b]) = (g_b - g_a) + (s_a - s_b),
  // where the second term is exactly 0 when both edges lie on one side (then the
  // difference of two tails keeps full relative precision) and 2 when the bin straddles
  // mu. An edge exactly at mu gives s = 0 and g = 0, which the formula also gets right.
  // Probabilities below 1e-300 (a bin ~37 kernel widths away) are floored there.
  matrix log_bin_prob(vector edges, array[] int lo_idx, array[] int hi_idx,
                      vector mu, vector sigma) {
    int E = rows(edges);
    matrix[2, rows(mu)] scale;
    scale[1] = -inv(sqrt2() * sigma)';
    scale[2] = -mu' .* scale[1];
    matrix[E, rows(mu)] u = append_col(edges, rep_vector(1, E)) * scale;
    matrix[E, rows(mu)] abs_u = abs(u);
    matrix[E, rows(mu)] s = u ./ (abs_u + 1e-300);
    matrix[E, rows(mu)] g = s .* erfc(abs_u);
    return log(fmax(g[hi_idx] - g[lo_idx] + (s[lo_idx] - s[hi_idx]), 2e-300));
  }

  // N x K matrix of log w_k + log alpha_k[c_n] + sum_d log kernel_kd(row n).
  // X holds the point dimensions as [y^2 | y | one-hot(class)], so their Gaussian
  // log-densities (a quadratic in y) come out of one data-by-parameter matrix product.
  matrix component_log_joint(matrix X, array[] int pdim, array[] int cdim,
                             matrix edges, array[] int n_edges, array[,] int lo_edge,
                             array[,] int hi_edge, vector w,
                             matrix log_alpha, matrix mu, matrix sigma) {
    int N = rows(X);
    int K = rows(mu);
    int C = cols(log_alpha);
    int Dp = size(pdim);
    int Dc = size(cdim);
    matrix[2 * Dp + C, K] theta;
    row_vector[K] base = log(w)' - 0.5 * Dp * log(2 * pi()) - Dc * log2();
    matrix[N, K] lp;
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
    lp = X * theta;
    for (j in 1:Dc) {
      int d = cdim[j];
      lp += log_bin_prob(edges[1:n_edges[j], j], lo_edge[j], hi_edge[j], mu[:, d], sigma[:, d]);
    }
    return lp;
  }

  // sum_n count_n * log sum_k exp(lp[n, k]). The sum over components is one matrix
  // product in linear space; that is exact unless a row's terms all underflow or one
  // overflows, in which case the per-row shifted log-sum-exp is used instead.
  real mixture_log_lik(matrix lp, vector count) {
    int N = rows(lp);
    vector[N] row_sum = exp(lp) * rep_vector(1, cols(lp));
    if (min(row_sum) > 1e-300 && max(row_sum) < 1e300) {
      return dot_product(count, log(row_sum));
    }
    vector[N] row_lse;
    for (n in 1:N) {
      row_lse[n] = log_sum_exp(lp[n]);
    }
    return dot_product(count, row_lse);
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
  matrix[N, 2 * Dp + C] X = rep_matrix(0, N, 2 * Dp + C);
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
      lo_edge[j, n] = locate(edges[1:m, j], y_lower[n, d]);
      hi_edge[j, n] = locate(edges[1:m, j], y_upper[n, d]);
    }
  }
  for (j in 1:Dp) {
    X[:, j] = square(y_lower[:, pdim[j]]);
    X[:, Dp + j] = y_lower[:, pdim[j]];
  }
  for (n in 1:N) {
    X[n, 2 * Dp + cls[n]] = 1;
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
  matrix[K, C] log_alpha;
  for (k in 1:K) {
    log_alpha[k] = log(alpha[k])';
  }
  eta ~ normal(0, eta_scale);
  for (k in 1:K) {
    alpha[k] ~ dirichlet(rep_vector(alpha_conc, C));
  }
  to_vector(mu_raw) ~ std_normal();
  to_vector(sigma_raw) ~ std_normal();
  target += mixture_log_lik(
    component_log_joint(X, pdim, cdim, edges, n_edges, lo_edge, hi_edge, w, log_alpha, mu, sigma), count_vec);
}

generated quantities {
  real log_lik;
  {
    matrix[K, C] log_alpha;
    for (k in 1:K) {
      log_alpha[k] = log(alpha[k])';
    }
    log_lik = mixture_log_lik(
      component_log_joint(X, pdim, cdim, edges, n_edges, lo_edge, hi_edge, w, log_alpha, mu, sigma), count_vec);
  }
}
