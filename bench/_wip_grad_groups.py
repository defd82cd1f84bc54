import numpy as np
from yieldwise.transducer.stan_data import build_stan_data
from yieldwise.backends._laplace import TransducerDensity
rng = np.random.default_rng(0)
n = 300
cls = rng.integers(0, 3, n)
y = rng.normal(cls, 1.0)
H, G = 4, 7
parent = rng.integers(0, H, G); parent[:H] = np.arange(H)
grp = rng.integers(0, G, n)
data, _ = build_stan_data(cls, y, y, None, 3, preconditioned=False, groups=(grp, parent))
print(data.G, data.H, data.U, data.N)
m = TransducerDensity(data)
u = rng.normal(0, 0.3, m.size)
lp, g = m.log_density(u)
num = np.empty_like(u)
for j in range(u.size):
    e = np.zeros_like(u); e[j] = 1e-6
    num[j] = (m.log_density(u + e)[0] - m.log_density(u - e)[0]) / 2e-6
print("max grad err", np.abs(num - g).max(), "scale", np.abs(g).max())
# log_prior batched equals the scalar part
q = m.quantities(u[None])
print(q["group_offset"].shape, q["log_lik"])
# brute-force log_lik: sum over items of log p(c, y | g) with kernels
