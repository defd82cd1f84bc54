// The ten-class reduction with one class matrix in place of the pair offsets and the
// others' temperature, sampled by NUTS: a probe of bench/mixture_matrix_probe.py (docs/
// model.md, "Many classes", "The mixture tilted by one class matrix"), not the shipped model.
//
// Each item has its output's top class a, second class b, the others O (C - 2 classes),
// the margin m = s_a - s_b of its squeezed log-probabilities s, and the rank r of its true
// class (1 first, 2 second, 3 others). The rank and margin follow the transducer's mixture
// over the margin (stan/transducer.stan: kernels fixed on the 1-D grid, theta[k, r] = a[k]
// + f_r[k], f_1 = 0, beta = softmax(theta), a and f_r smooth with the same priors), tilted
// per item by the class terms, the way the shipped program tilts a pair's rows by its
// offsets:
//   p(r, m | item's classes and scores) = F(r, m) exp(tau_r) / sum_r' F_r' exp(tau_r'),
//   F(r, m) = sum_k beta[k, r] kernel_k(m),  F_r = sum_k beta[k, r],
// with E_c = gamma s_c + k_c + sd_q (Q z)_c (z = s centred), Et_c = E_c - gamma s_c,
//   tau_1 = 0,  tau_2 = Et_b - Et_a,  tau_3 = log sum_{j in O} exp(E_j) - gamma s_b - Et_a,
// and an item of rank 3 is class j of O with probability softmax over O of E_j. These are
// the log-odds of matrix scaling, log p(c | y) = E_c + [c = a] g(m) + const, with the parts
// that depend on the margin alone (-gamma m - g(m)) left to the mixture's log-odds along m.
// Priors: gamma ~ N(1, 3^2), k ~ N(0, 1), Q_raw ~ N(0, 1), sd_q ~ half-Normal(0, sd_q_scale)
// (as log sd_q, with its Jacobian): bench/matrix_probe.py's at sd_q_scale = 1. With
// local_df > 0 each class term has a local scale of its own, Q = Q_raw .* lam with
// lam ~ half-Student-t(local_df, 0, 1) (as log lam, with its Jacobian): at local_df = 1 the
// horseshoe, sd_q its global scale, so that a few large terms (confused pairs) need not
// let the other terms grow with them; with local_df = 0, Q = Q_raw as before.
// All parameters are one vector u = centre + L zeta, an exact affine change of variables
// (L from the Laplace fit of this program's own density: the probe's driver).
functions {
  // log beta up to its normalising constant, K x 3 (the header's theta), from u
  matrix theta_of(vector u, matrix fixed_basis, matrix smooth_basis) {
    int K = rows(fixed_basis);
    int P = cols(fixed_basis);
    int R = cols(smooth_basis);
    int at_f = P + R;  // (P - 1) + 1 + R: a's block, then f's
    vector[2] tau_f = exp(segment(u, at_f + 2 * P + 1, 2));
    matrix[P, 2] f_fixed = to_matrix(segment(u, at_f + 1, 2 * P), P, 2);
    matrix[R, 2] f_raw = to_matrix(segment(u, at_f + 2 * P + 3, 2 * R), R, 2);
    vector[K] a = fixed_basis[:, 2:P] * segment(u, 1, P - 1)
                  + exp(u[P]) * (smooth_basis * segment(u, P + 1, R));
    matrix[K, 3] theta;
    theta[:, 1] = a;
    for (r in 1:2) {
      theta[:, r + 1] = a + fixed_basis * f_fixed[:, r]
                        + tau_f[r] * (smooth_basis * f_raw[:, r]);
    }
    return theta;
  }

  // the class terms' matrix Q (C x C) from u: Q_raw (from u[at_q]), times the local scales
  // (from u[at_q + C * C]) if there are any
  matrix class_matrix(vector u, int at_q, int C, int HL) {
    matrix[C, C] Q = to_matrix(segment(u, at_q, C * C), C, C);
    if (HL > 0) {
      Q = Q .* exp(to_matrix(segment(u, at_q + C * C, HL), C, C));
    }
    return Q;
  }
}

data {
  int<lower=1> N;
  int<lower=3> C;
  int<lower=2> K;
  int<lower=1> P;                         // fixed functions (column 1: the constant)
  int<lower=1> R;                         // smooth functions
  matrix<lower=0>[N, K] kern;             // kernel values at each item's margin
  matrix[K, P] fixed_basis;
  vector<lower=0>[P] fixed_scale;
  matrix[K, R] smooth_basis;
  real<lower=0> tau_a_scale;
  real<lower=0> tau_f_scale;
  real<lower=0> tau_f_df;                 // 0: half-Normal
  real<lower=0> tau_f_floor;
  real<lower=0> sd_q_scale;               // the class terms' scale: half-Normal(0, this)
  real<lower=0> local_df;                 // > 0: local scales, half-Student-t(local_df)
  array[N] int<lower=1, upper=3> rank;
  array[N] int<lower=1, upper=C> cls;
  array[N] int<lower=1, upper=C> top;
  array[N] int<lower=1, upper=C> second;
  array[N, C - 2] int<lower=1, upper=C> oth;
  matrix[N, C] S;
  matrix[N, C] Z;
  int<lower=1> M;
  vector[M] centre;
  matrix[M, M] L;
  // outputs at which each draw's p(c | y) is written
  int<lower=0> J;
  matrix<lower=0>[J, K] kern_star;
  array[J] int<lower=1, upper=C> top_star;
  array[J] int<lower=1, upper=C> second_star;
  array[J, C - 2] int<lower=1, upper=C> oth_star;
  matrix[J, C] S_star;
  matrix[J, C] Z_star;
}

transformed data {
  int P1 = P - 1;
  int at_f = P1 + 1 + R;                  // u: a's block, then f's, then the class terms'
  int at_t = at_f + 2 * (P + 1 + R);
  int at_q = at_t + 2 + C;                // Q_raw's block, after gamma and k
  int HL = local_df > 0 ? C * C : 0;      // the local scales' block, after Q_raw's
  if (M != at_t + 1 + C + C * C + HL + 1) {
    reject("M must be ", at_t + 1 + C + C * C + HL + 1, ", found ", M);
  }
  // the likelihood's gathers, as indices into column-major vectors of (N x C) and (N x 3)
  // matrices, so that the model block has no loop over items
  array[N] int at_top;
  array[N] int at_second;
  array[N] int at_rank;
  array[N, C - 2] int at_oth;
  vector[N] is_2 = rep_vector(0, N);
  vector[N] is_3 = rep_vector(0, N);
  int N3 = 0;
  for (n in 1:N) {
    at_top[n] = (top[n] - 1) * N + n;
    at_second[n] = (second[n] - 1) * N + n;
    at_rank[n] = (rank[n] - 1) * N + n;
    for (j in 1:(C - 2)) {
      at_oth[n, j] = (oth[n, j] - 1) * N + n;
    }
    is_2[n] = rank[n] == 2;
    is_3[n] = rank[n] == 3;
    N3 += rank[n] == 3;
  }
  array[N3] int third;      // the items of rank 3, and their classes' places in E
  array[N3] int at_cls3;
  {
    int i = 0;
    for (n in 1:N) {
      if (rank[n] == 3) {
        i += 1;
        third[i] = n;
        at_cls3[i] = (cls[n] - 1) * N + n;
      }
    }
  }
  vector[N] s_second = to_vector(S)[at_second];
}

parameters {
  vector[M] zeta;
}

model {
  vector[M] u = centre + L * zeta;
  real tau_a = exp(u[P1 + 1]);
  vector[2] tau_f = exp(segment(u, at_f + 2 * P + 1, 2));
  matrix[K, 3] theta = theta_of(u, fixed_basis, smooth_basis);
  real gamma = u[at_t + 1];
  row_vector[C] k = segment(u, at_t + 2, C)';
  matrix[C, C] Q = class_matrix(u, at_q, C, HL);
  real log_sd_q = u[M];
  // priors (scales sampled as logs: their densities times the Jacobians)
  segment(u, 1, P1) ~ normal(0, fixed_scale[2:P]);
  segment(u, at_f + 1, 2 * P) ~ normal(0, to_vector(rep_matrix(fixed_scale, 2)));
  segment(u, P1 + 2, R) ~ std_normal();
  segment(u, at_f + 2 * P + 3, 2 * R) ~ std_normal();
  tau_a ~ normal(0, tau_a_scale);
  if (tau_f_df > 0) {
    tau_f ~ student_t(tau_f_df, 0, tau_f_scale);
  } else {
    tau_f ~ normal(0, tau_f_scale);
  }
  target += u[P1 + 1] + sum(segment(u, at_f + 2 * P + 1, 2));
  if (tau_f_floor > 0) {
    target += sum(log1m_exp(-square(tau_f / tau_f_floor)));
  }
  gamma ~ normal(1, 3);
  k ~ std_normal();
  segment(u, at_q, C * C) ~ std_normal();  // Q_raw
  if (HL > 0) {
    vector[HL] log_lam = segment(u, at_q + C * C, HL);
    exp(log_lam) ~ student_t(local_df, 0, 1);
    target += sum(log_lam);
  }
  exp(log_sd_q) ~ normal(0, sd_q_scale);
  target += log_sd_q;
  {
    // the header's likelihood, vectorised over items (every value gathered by index)
    row_vector[3] peak;
    vector[3] log_mass;
    for (r in 1:3) {
      peak[r] = max(theta[:, r]);
      log_mass[r] = log_sum_exp(theta[:, r]);
    }
    real mass_top = max(log_mass);
    log_mass -= mass_top;  // (added back below: N items' denominators)
    vector[N] lik = to_vector(kern * exp(theta - rep_matrix(peak, K)))[at_rank];
    vector[N * C] e_t = to_vector(rep_matrix(k, N) + exp(log_sd_q) * (Z * Q'));
    vector[N * C] e = e_t + gamma * to_vector(S);
    matrix[N, C - 2] e_o;
    for (j in 1:(C - 2)) {
      e_o[:, j] = e[at_oth[:, j]];
    }
    vector[N] e_b = e[at_second];  // no other's E exceeds it by much: a stable shift
    vector[N] lse_o = log(exp(e_o - rep_matrix(e_b, C - 2)) * rep_vector(1, C - 2)) + e_b;
    vector[N] ta = e_t[at_top];
    vector[N] tilt_2 = e_t[at_second] - ta;
    vector[N] tilt_3 = lse_o - gamma * s_second - ta;
    target += sum(log(lik)) + sum(peak[rank]) + dot_product(is_2, tilt_2)
              + dot_product(is_3, tilt_3)
              - sum(log(exp(log_mass[1]) + exp(log_mass[2] + tilt_2)
                        + exp(log_mass[3] + tilt_3))) - N * mass_top;
    target += sum(e[at_cls3]) - sum(lse_o[third]);
  }
}

generated quantities {
  matrix[J, C] proba;
  real sd_q;
  {
    vector[M] u = centre + L * zeta;
    matrix[K, 3] theta = theta_of(u, fixed_basis, smooth_basis);
    real gamma = u[at_t + 1];
    row_vector[C] k = segment(u, at_t + 2, C)';
    matrix[C, C] Q = class_matrix(u, at_q, C, HL);
    sd_q = exp(u[M]);
    row_vector[3] peak;
    for (r in 1:3) {
      peak[r] = max(theta[:, r]);
    }
    matrix[J, 3] lik = kern_star * exp(theta - rep_matrix(peak, K));
    matrix[J, C] E = gamma * S_star + rep_matrix(k, J) + sd_q * (Z_star * Q');
    for (j in 1:J) {
      real ta = E[j, top_star[j]] - gamma * S_star[j, top_star[j]];
      real lse_o = log_sum_exp(E[j, oth_star[j]]);
      row_vector[3] tilt = [0, E[j, second_star[j]] - gamma * S_star[j, second_star[j]] - ta,
                            lse_o - gamma * S_star[j, second_star[j]] - ta];
      vector[3] p = softmax((log(lik[j]) + peak + tilt)');
      proba[j] = rep_row_vector(0, C);
      proba[j, top_star[j]] = p[1];
      proba[j, second_star[j]] = p[2];
      proba[j, oth_star[j]] = p[3] * softmax(E[j, oth_star[j]]')';
    }
  }
}
