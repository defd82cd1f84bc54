// Long-run utility per item of a deployed decision rule, for every posterior draw of a
// fitted transducer (docs/theory.md section 4), computed in generated quantities.
//
// For draw s and utility matrix m, with a 1-D output (model scale) divided into cells
// [cell_lower_j, cell_upper_j] and the rule's decision in each cell given as data,
//
//   u[s, m] = sum_j sum_c U_m[decision[m, j], c] * M_s(c, j),
//   M_s(c, j) = sum_k w_sk alpha_skc (Phi((cell_upper_j - mu_sk) / sigma_sk)
//                                     - Phi((cell_lower_j - mu_sk) / sigma_sk)).
//
// The posterior draws are data and the program has no parameters: it runs once with the
// fixed_param sampler on either backend (PyStan has no standalone generated quantities,
// and these draws need not come from a CmdStan CSV). yieldwise's numpy implementation
// (yieldwise/long_run.py) is the default; this program is the independent check that
// tests/test_long_run_stan.py compares it with. Infinite cell edges are passed as
// +-1e12 (Phi is exactly 0 or 1 there).
data {
  int<lower=1> S;                          // posterior draws
  int<lower=1> K;                          // mixture components
  int<lower=2> C;                          // classes
  int<lower=1> J;                          // cells
  int<lower=1> M;                          // utility matrices
  int<lower=2> Dd;                         // decisions
  array[S] simplex[K] w;
  array[S, K] simplex[C] alpha;
  matrix[S, K] mu;                         // the one output dimension
  matrix<lower=0>[S, K] sigma;
  vector[J] cell_lower;
  vector[J] cell_upper;
  array[M, J] int<lower=1, upper=Dd> decision;
  array[M] matrix[Dd, C] utility;
}

generated quantities {
  matrix[S, M] u;
  for (s in 1:S) {
    matrix[J, C] mass = rep_matrix(0, J, C);
    for (k in 1:K) {
      vector[J] p = Phi((cell_upper - mu[s, k]) / sigma[s, k])
                    - Phi((cell_lower - mu[s, k]) / sigma[s, k]);
      mass += p * (w[s, k] * alpha[s, k]');
    }
    for (m in 1:M) {
      real total = 0;
      for (j in 1:J) {
        total += utility[m][decision[m, j]] * mass[j]';
      }
      u[s, m] = total;
    }
  }
}
