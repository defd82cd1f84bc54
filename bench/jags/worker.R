# One JAGS worker for bench/bench_vs_jags.py: holds a compiled model (some of the chains)
# and runs the commands the Python driver sends on stdin, one per line:
#   adapt <n>            adaptive phase (rjags::adapt), then adaptation is switched off
#   update <n>           burn-in iterations, nothing kept
#   sample <n> <thin> <file>   n iterations; the monitored nodes go to <file> as float64,
#                        chain-major (chain, iteration, node), their names to <file>.names
#   quit
# Each command answers "ok <wall seconds> <CPU seconds>" on stdout, timed inside R around
# the JAGS call only, so that the driver can tell sampler time from its own overhead.
# Usage: Rscript worker.R <model.jags> <setup.R>  (setup.R defines `data` and `inits`).
suppressMessages(library(rjags))
args <- commandArgs(trailingOnly = TRUE)
source(args[2])
monitored <- c("w", "alpha", "mu", "sigma")

# wall and CPU (user + system) seconds of this process spent on expr
timed <- function(expr) {
  started <- proc.time()
  value <- expr
  used <- proc.time() - started
  list(value = value, seconds = used[["elapsed"]], cpu = used[["user.self"]] + used[["sys.self"]])
}

reply <- function(...) {
  cat(..., "\n", sep = " ")
  flush(stdout())
}

compiled <- timed(jags.model(args[1], data = data, inits = inits, n.chains = length(inits),
                             n.adapt = 0, quiet = TRUE))
model <- compiled$value
# which sampler JAGS chose for each node, as "<sampler>:<how many nodes>" pairs
samplers <- table(names(list.samplers(model)))
reply("ready", compiled$seconds, paste(names(samplers), samplers, sep = ":", collapse = ","))

input <- file("stdin")
open(input)
repeat {
  words <- strsplit(readLines(input, n = 1), " ")[[1]]
  if (length(words) == 0 || words[1] == "quit") break
  n <- as.integer(words[2])
  if (words[1] == "adapt") {
    done <- timed(adapt(model, n.iter = n, end.adaptation = TRUE))
    reply("ok", done$seconds, done$cpu)
  } else if (words[1] == "update") {
    done <- timed(update(model, n.iter = n, progress.bar = "none"))
    reply("ok", done$seconds, done$cpu)
  } else if (words[1] == "sample") {
    done <- timed(coda.samples(model, monitored, n.iter = n, thin = as.integer(words[3]),
                               progress.bar = "none"))
    out <- file(words[4], "wb")
    for (chain in done$value) writeBin(as.vector(t(as.matrix(chain))), out, size = 8)
    close(out)
    writeLines(colnames(as.matrix(done$value[[1]])), paste0(words[4], ".names"))
    reply("ok", done$seconds, done$cpu)
  } else {
    reply("error unknown command", words[1])
  }
}
