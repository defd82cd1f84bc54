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
//   a   = fixed_basis[:, 2:P] * a_fixed  + smooth_basis * a_smooth,  a_smooth ~ N(0, tau_a),
//   f_c = fixed_basis * f_fixed[:, c] + tau_f[c] * smooth_basis * f_raw[:, c],
//                                                      f_raw ~ N(0, 1),
// fixed_basis the functions the smoothing penalty leaves free (constant and linear terms:
// for a grid the null space of the second-difference penalty) with weak Normal priors,
// smooth_basis the penalty's other eigenvectors scaled by the inverse square roots of their
// eigenvalues (an intrinsic random walk of order two along each grid axis; for scattered
// centres a Gaussian process), and half-Normal smoothing sd's tau. As tau_f -> 0 the class
// log-odds become linear in the transformed output (Platt scaling is the model's smooth
// limit); larger tau_f lets non-monotone truths through; and since f_c is a smooth function
// with no per-kernel pseudo-counts, a region holding many items of one class and none of
// another reaches probabilities far below 1/m (no floor).
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
  real<lower=0> tau_f_scale;                 // half-Normal scale of the log-odds' smoothness
}

transformed data {
  vector[N] count_vec = to_vector(count);
  real log_lik_constant = dot_product(count_vec, kern_log_scale);
  // position of each row's (row, class) entry in the column-major N x C likelihood matrix
  array[N] int pick;
  for (n in 1:N) {
    pick[n] = (cls[n] - 1) * N + n;
  }
  int P1 = P - 1;
}

parameters {
  vector[P1] a_fixed;
  real<lower=0> tau_a;
  // centred: the outputs' density is informed by every item (measured in docs/model.md:
  // half the leapfrog steps of the non-centred form)
  vector[R] a_smooth;
  matrix[P, C - 1] f_fixed;
  vector<lower=0>[C - 1] tau_f;
  // non-centred (f_smooth = f_raw * tau_f): class log-odds are weakly informed where one
  // class is rare (written out: Stan 2.35's matrix-valued multiplier misread its scales)
  matrix[R, C - 1] f_raw;
}

transformed parameters {
  // log beta, up to the normalising constant: K x C
  matrix[K, C] theta;
  {
    vector[K] a = smooth_basis * a_smooth;
    if (P > 1) {
      a += fixed_basis[:, 2:P] * a_fixed;
    }
    theta = rep_matrix(a, C);
    theta[:, 2:C] += fixed_basis * f_fixed + smooth_basis * (f_raw .* rep_matrix(tau_f', R));
  }
}

model {
  a_fixed ~ normal(0, fixed_scale[2:P]);
  tau_a ~ normal(0, tau_a_scale);
  a_smooth ~ normal(0, tau_a);
  to_vector(f_fixed) ~ normal(0, to_vector(rep_matrix(fixed_scale, C - 1)));
  tau_f ~ normal(0, tau_f_scale);
  to_vector(f_raw) ~ std_normal();
  {
    // beta = exp(theta - log_norm): the rows' likelihoods are one (N x K) by (K x C)
    // product, each column shifted by its largest theta so that nothing overflows
    real log_norm = log_sum_exp(theta);
    row_vector[C] top;
    for (c in 1:C) {
      top[c] = max(theta[:, c]);
    }
    vector[N] lik = to_vector(kern * exp(theta - rep_matrix(top, K)))[pick];
    target += dot_product(count_vec, log(lik) + top[cls]' - log_norm);
  }
}

generated quantities {
  // the mixture in the form every formula of theory 3.2 reads (docs/model.md):
  // w_k = sum_c beta[k, c], alpha_k = beta[k, ] / w_k, mu = loc, sigma = width
  vector[K] w;
  array[K] vector[C] alpha;
  matrix[K, D] mu = loc;
  matrix[K, D] sigma = width;
  real log_lik;
  {
    real log_norm = log_sum_exp(theta);
    for (k in 1:K) {
      real row_norm = log_sum_exp(theta[k]);
      w[k] = exp(row_norm - log_norm);
      alpha[k] = softmax(theta[k]');
    }
    matrix[K, C] beta = exp(theta - log_norm);
    log_lik = log_lik_constant
              + dot_product(count_vec, log(to_vector(kern * beta)[pick]));
  }
}
