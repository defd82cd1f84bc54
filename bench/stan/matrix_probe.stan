// The matrix-scaling probe of bench/matrix_probe.py sampled by NUTS (docs/model.md, "One
// matrix for every rank"): every class c of an item has the log-odds
//   eta_c = gamma s_c + k_c + sd_q (Q_raw z)_c + [c = top] (B beta)
// with gamma ~ N(1, 3^2), k ~ N(0, 1), Q_raw ~ N(0, 1) (so Q = sd_q Q_raw ~ N(0, sd_q^2)),
// sd_q ~ half-Normal(0, 1) sampled as log sd_q (with its Jacobian), beta ~ N(0, 3^2); the
// item's class is categorical in softmax(eta). theta = (gamma, k, vec Q_raw row by row,
// beta) is sampled as theta = centre + L zeta, an exact change of variables with L the
// Cholesky factor of the probe's Laplace covariance (non-centred) at one sd_q.
data {
  int<lower=1> N;
  int<lower=2> C;
  int<lower=1> G;
  matrix[N, C] S;                  // the squeezed log-probabilities
  matrix[N, C] Z;                  // the same, centred per item
  matrix[N, C] top_mask;           // 1 at each item's top class
  matrix[N, G] B;                  // the margin's bumps
  matrix[N, C] onehot;             // each item's class
  int<lower=1> P;                  // 1 + C + C * C + G
  vector[P] centre;
  matrix[P, P] L;
}
parameters {
  vector[P] zeta;
  real log_sd_q;
}
model {
  vector[P] theta = centre + L * zeta;
  real gamma = theta[1];
  row_vector[C] k = theta[2:(C + 1)]';
  matrix[C, C] Q_raw = to_matrix(theta[(C + 2):(C + 1 + C * C)], C, C, 0);
  vector[G] beta = theta[(C + 2 + C * C):P];
  real sd_q = exp(log_sd_q);
  matrix[N, C] eta = gamma * S + rep_matrix(k, N) + sd_q * (Z * Q_raw')
                     + top_mask .* rep_matrix(B * beta, C);
  target += sum(eta .* onehot) - sum(log(exp(eta) * rep_vector(1, C)));
  target += normal_lpdf(gamma | 1, 3) + std_normal_lpdf(k) + std_normal_lpdf(to_vector(Q_raw))
            + normal_lpdf(beta | 0, 3);
  target += normal_lpdf(sd_q | 0, 1) + log_sd_q;  // half-Normal(0, 1), Jacobian of exp
}
