# The R face of yieldwise, evaluated in the embedded R by yieldwise.rbridge.install().
#
# Every yw_ function checks its R inputs here (NAs are reported by column and row),
# hands plain R objects to one Python function of .yw_py (installed by the bridge
# before this file is evaluated), and returns plain R objects: numeric matrices with
# dimnames, factors, data.frames, and posterior::draws_df when that package is
# installed. A Python exception arrives as an R error of class "yieldwise_error"
# carrying the same message.

.yw_call <- function(fn, ...) {
  result <- .yw_py[[fn]](list(...))
  if (inherits(result, "yw_python_error")) {
    stop(structure(
      class = c("yieldwise_error", "error", "condition"),
      list(message = result$message, call = sys.call(-1), python_type = result$type)
    ))
  }
  warned <- attr(result, "yw_warnings")
  if (!is.null(warned)) {
    attr(result, "yw_warnings") <- NULL
    for (message in warned) warning(message, call. = FALSE)
  }
  result
}

.yw_stop <- function(message) {
  stop(structure(
    class = c("yieldwise_error", "error", "condition"),
    list(message = message, call = sys.call(-1), python_type = NA_character_)
  ))
}

# NAs are never dropped: name the argument, the column and the first rows.
.yw_check_na <- function(x, what) {
  if (is.data.frame(x)) {
    for (column in names(x)) .yw_check_na(x[[column]], sprintf("%s column '%s'", what, column))
    return(invisible(x))
  }
  rows <- which(is.na(x))
  if (length(rows) > 0) {
    .yw_stop(sprintf(
      "%s has %d missing value(s) (NA), in row(s) %s; remove or impute them first",
      what, length(rows), paste(utils::head(rows, 5), collapse = ", ")
    ))
  }
  invisible(x)
}

.yw_columns <- function(data, columns, what) {
  if (!is.data.frame(data)) .yw_stop(sprintf("'%s' must be a data.frame, found %s", what, class(data)[1]))
  missing <- setdiff(columns, names(data))
  if (length(missing) > 0) {
    .yw_stop(sprintf(
      "'%s' has no column(s) %s; its columns are %s", what,
      paste(sQuote(missing, FALSE), collapse = ", "), paste(sQuote(names(data), FALSE), collapse = ", ")
    ))
  }
  .yw_check_na(data[columns], sprintf("'%s'", what))
  data[columns]
}

# Labels travel as text (as.character) with their order: a factor's levels; numbers and
# logicals in R's own order (1 < 2 < 10, FALSE < TRUE), as text; text labels without an
# order (levels NULL) are sorted by Python. Python reads an output with one column per
# class by position in this order, so "1" < "10" < "2" would pair columns wrongly.
.yw_labels <- function(x, what) {
  .yw_check_na(x, sprintf("'%s'", what))
  if (is.factor(x)) return(list(values = as.character(x), levels = levels(x)))
  levels <- NULL
  if (is.numeric(x) || is.logical(x)) {
    levels <- as.character(sort(unique(x)))
    if (anyDuplicated(levels)) {
      .yw_stop(sprintf(paste0(
        "'%s' holds distinct numbers that print as the same label (%s); round them, or ",
        "make '%s' a factor with the labels you mean"),
        what, paste(unique(levels[duplicated(levels)]), collapse = ", "), what))
    }
  }
  list(values = as.character(x), levels = levels)
}

# A set of labels given as an argument (decisions, classes, decision_set): text, no NA.
.yw_label_set <- function(x, what) {
  if (is.null(x)) return(NULL)
  missing <- which(is.na(x))
  if (length(missing) > 0) {
    .yw_stop(sprintf("'%s' has a missing value (NA) at position(s) %s; every label must be given",
                     what, paste(utils::head(missing, 5), collapse = ", ")))
  }
  as.character(x)
}

# Class frequencies: NAs are named by position here (Python would see a missing value).
.yw_prevalences <- function(prevalences) {
  if (is.atomic(prevalences) && anyNA(prevalences)) {
    .yw_stop(sprintf(paste0(
      "'prevalences' has a missing value (NA) at position(s) %s; give a frequency for ",
      "every class, or leave 'prevalences' out (NULL) for the calibration frequencies"),
      paste(utils::head(which(is.na(prevalences)), 5), collapse = ", ")))
  }
  prevalences
}

.yw_matrix <- function(x, what) {
  if (!is.matrix(x) || !is.numeric(x)) {
    .yw_stop(sprintf("'%s' must be a numeric matrix with dimnames, found %s", what, class(x)[1]))
  }
  .yw_check_na(x, sprintf("'%s'", what))
  if (is.null(colnames(x)) || is.null(rownames(x))) {
    .yw_stop(sprintf(paste0("'%s' must name its columns (the classes) and rows (the decisions); ",
                            "build it with yw_utility_matrix(values, decisions, classes) or set ",
                            "dimnames(%s) <- list(decisions, classes)"), what, what))
  }
  list(values = x, decisions = rownames(x), classes = colnames(x), what = what)
}

.yw_utilities <- function(utility) {
  if (is.list(utility) && !is.matrix(utility)) {
    if (is.null(names(utility)) || any(names(utility) == "")) {
      .yw_stop("'utility' as a list must name every matrix, e.g. list(screening = U1, accuracy = U2)")
    }
    return(lapply(utility, .yw_matrix, what = "utility"))
  }
  .yw_matrix(utility, "utility")
}

.yw_draws <- function(frame) {
  if (requireNamespace("posterior", quietly = TRUE)) posterior::as_draws_df(frame) else frame
}

# Python clears .yw_state$alive when it shuts down; later finalizers must not call it.
.yw_state <- new.env(parent = emptyenv())
.yw_state$alive <- TRUE

.yw_handle <- function(key) {
  handle <- new.env(parent = emptyenv())
  handle$key <- key
  reg.finalizer(handle, function(h) {
    if (isTRUE(.yw_state$alive)) try(.yw_py$release(list(key = h$key)), silent = TRUE)
  })
  class(handle) <- "yw_transducer"
  handle
}

.yw_key <- function(transducer) {
  if (!inherits(transducer, "yw_transducer")) {
    .yw_stop(sprintf("'transducer' must come from yw_fit() or yw_load(), found %s", class(transducer)[1]))
  }
  transducer$key
}

print.yw_transducer <- function(x, ...) {
  cat(.yw_call("describe", key = x$key), "\n")
  invisible(x)
}

# ------------------------------------------------------------------ public functions
yw_utility_matrix <- function(values, decisions = rownames(values), classes = colnames(values)) {
  values <- as.matrix(values)
  if (!is.numeric(values)) {
    .yw_stop(sprintf(paste0("'values' must be a numeric matrix, found a %s matrix; convert it ",
                            "first, e.g. storage.mode(values) <- \"double\""), typeof(values)))
  }
  .yw_check_na(values, "'values'")
  # labels as text the way every other yw_ function makes them (1e5 -> "1e+05", TRUE -> "TRUE")
  .yw_call("utility_matrix", values = values, decisions = .yw_label_set(decisions, "decisions"),
           classes = .yw_label_set(classes, "classes"))
}

yw_confusion <- function(truth, decisions, classes = NULL, decision_set = NULL) {
  if (length(truth) != length(decisions)) {
    .yw_stop(sprintf("'truth' and 'decisions' must have the same length, found %d and %d",
                     length(truth), length(decisions)))
  }
  decisions_are_factor <- is.factor(decisions)
  truth <- .yw_labels(truth, "truth")
  decisions <- .yw_labels(decisions, "decisions")
  classes <- if (is.null(classes)) truth$levels else .yw_label_set(classes, "classes")
  if (!is.null(decision_set)) {
    decision_set <- .yw_label_set(decision_set, "decision_set")
  } else if (decisions_are_factor) {
    decision_set <- decisions$levels
  } else if (!all(decisions$values %in% c(classes, truth$values))) {
    # decisions that are not classes: numbers in R's order, text sorted
    decision_set <- if (is.null(decisions$levels)) sort(unique(decisions$values)) else decisions$levels
  }  # else: decision k means "choose class k", aligned with the classes
  .yw_call("confusion", truth = truth, decisions = decisions, classes = classes,
           decision_set = decision_set)
}

yw_yield <- function(confusion, utility) {
  .yw_call("yield", confusion = .yw_matrix(confusion, "confusion"),
           utility = .yw_matrix(utility, "utility"))
}

yw_metrics <- function(confusion, positive = NULL, average = NULL) {
  .yw_call("metrics", confusion = .yw_matrix(confusion, "confusion"),
           positive = if (is.null(positive)) NULL else as.character(positive),
           average = if (is.null(average)) NULL else as.character(average))
}

yw_audit <- function(metrics = c("accuracy", "balanced_accuracy", "f1", "matthews", "precision"),
                     utility_prior = "uniform", error_sd = c(0, 0.1, 0.2, 0.3),
                     n_pairs = 100000, seed = NULL) {
  prior <- if (is.matrix(utility_prior)) .yw_matrix(utility_prior, "utility_prior") else as.character(utility_prior)
  .yw_call("audit", metrics = as.character(metrics), utility_prior = prior,
           error_sd = as.numeric(error_sd), n_pairs = as.numeric(n_pairs),
           seed = if (is.null(seed)) NULL else as.numeric(seed))
}

yw_fit <- function(data, class_col, output_cols, classes = NULL, n_components = "auto",
                   chains = 4, warmup = NULL, draws = NULL, seed = NULL, backend = "auto",
                   progress = FALSE, kernel_tail_cut = 1e-15, class_reduction = "auto",
                   likelihood_bins = "auto") {
  outputs <- .yw_columns(data, output_cols, "data")
  for (column in names(outputs)) {
    if (!is.numeric(outputs[[column]])) {
      .yw_stop(sprintf("'data' column '%s' must be numeric (classifier outputs), found %s",
                       column, class(outputs[[column]])[1]))
    }
  }
  truth <- .yw_labels(.yw_columns(data, class_col, "data")[[1]], class_col)
  key <- .yw_call("fit", outputs = outputs, truth = truth,
                  classes = if (is.null(classes)) truth$levels else .yw_label_set(classes, "classes"),
                  n_components = n_components, chains = as.numeric(chains),
                  warmup = if (is.null(warmup)) NULL else as.numeric(warmup),
                  draws = if (is.null(draws)) NULL else as.numeric(draws),
                  seed = if (is.null(seed)) NULL else as.numeric(seed), backend = backend,
                  progress = isTRUE(progress), kernel_tail_cut = as.numeric(kernel_tail_cut),
                  class_reduction = if (is.null(class_reduction)) NULL else as.character(class_reduction),
                  likelihood_bins = if (is.null(likelihood_bins)) NULL
                                    else if (is.character(likelihood_bins)) likelihood_bins
                                    else as.numeric(likelihood_bins))
  .yw_handle(key)
}

.yw_outputs <- function(transducer, data) {
  columns <- .yw_call("output_columns", key = .yw_key(transducer))
  outputs <- .yw_columns(data, columns, "data")
  outputs
}

yw_predict <- function(transducer, data, prob = 0.75, prevalences = NULL) {
  prevalences <- .yw_prevalences(prevalences)
  .yw_call("predict", key = .yw_key(transducer), outputs = .yw_outputs(transducer, data),
           prob = as.numeric(prob), prevalences = prevalences)
}

yw_decide <- function(transducer, data, utility, prevalences = NULL) {
  prevalences <- .yw_prevalences(prevalences)
  if (is.matrix(transducer) && is.numeric(transducer)) {
    # a probability matrix: its columns are matched to the utility's classes by name
    u <- .yw_matrix(utility, "utility")
    .yw_check_na(transducer, "'probabilities'")
    if (is.null(colnames(transducer))) {
      .yw_stop(sprintf(paste0(
        "'probabilities' (the first argument) must name its columns by class, so that they ",
        "are matched to the utility's classes by name; set colnames(probabilities) <- c(%s) ",
        "in the order of its columns"), paste0("\"", u$classes, "\"", collapse = ", ")))
    }
    return(.yw_call("decide_probabilities", probabilities = transducer,
                    classes = colnames(transducer), utility = u))
  }
  .yw_call("decide", key = .yw_key(transducer), outputs = .yw_outputs(transducer, data),
           utility = .yw_matrix(utility, "utility"), prevalences = prevalences)
}

yw_long_run_utility <- function(transducer, utility, rule = "augmented", rescale = FALSE,
                                prevalences = NULL) {
  prevalences <- .yw_prevalences(prevalences)
  frame <- .yw_call("long_run_utility", key = .yw_key(transducer),
                    utility = .yw_utilities(utility), rule = rule, rescale = isTRUE(rescale),
                    prevalences = prevalences)
  .yw_draws(frame)
}

yw_compare <- function(transducers, utility, rule = "augmented", prevalences = NULL) {
  if (!is.list(transducers) || inherits(transducers, "yw_transducer") ||
      is.null(names(transducers)) || any(names(transducers) == "")) {
    .yw_stop("'transducers' must be a named list of yw_fit() results, e.g. list(forest = t1, net = t2)")
  }
  prevalences <- .yw_prevalences(prevalences)
  keys <- vapply(transducers, .yw_key, character(1))
  result <- .yw_call("compare", keys = as.list(keys), utility = .yw_utilities(utility),
                     rule = rule, prevalences = prevalences)
  result$draws <- .yw_draws(result$draws)
  result
}

yw_save <- function(transducer, path) {
  invisible(.yw_call("save", key = .yw_key(transducer), path = path.expand(path)))
}

yw_load <- function(path) {
  .yw_handle(.yw_call("load", path = path.expand(path)))
}

yw_report <- function(config, out, overwrite = FALSE, chains = NULL, warmup = NULL, draws = NULL,
                      quiet = FALSE, backend = NULL) {
  invisible(.yw_call("report", config = path.expand(config), out = path.expand(out),
                     overwrite = isTRUE(overwrite), chains = chains, warmup = warmup,
                     draws = draws, quiet = isTRUE(quiet), backend = backend))
}

yw_help <- function(topic = NULL) {
  topics <- names(.yw_help_texts)
  if (is.null(topic)) {
    cat("yieldwise from R. Functions (see yw_help(\"name\")):\n",
        paste0("  ", topics, collapse = "\n"), "\n", sep = "")
    return(invisible(topics))
  }
  topic <- as.character(topic)
  if (!topic %in% topics) {
    .yw_stop(sprintf("no help for '%s'; topics: %s", topic, paste(topics, collapse = ", ")))
  }
  usage <- deparse(args(get(topic)))
  usage <- paste(usage[-length(usage)], collapse = "\n")
  text <- sprintf("%s\n\nUsage:\n%s\n\n%s\n", topic, sub("^function ", topic, usage),
                  .yw_help_texts[[topic]])
  cat(text)
  invisible(text)
}

.yw_help_texts <- list(
  yw_utility_matrix = paste(
    "A utility matrix: rows are decisions, columns are true classes; entry [d, c] is the",
    "utility of deciding d when the truth is c. Returns a numeric matrix with dimnames",
    "(decision, class), checked by yieldwise (finite, labels unique, right sizes). 'values'",
    "must be numeric; labels become text with as.character(), as in every yw_ function",
    "(c(0, 1) -> \"0\", \"1\"; TRUE -> \"TRUE\"), and an NA label is an error.",
    "Example: U <- yw_utility_matrix(matrix(c(0, -1, -10, 5), 2),",
    "  decisions = c(\"pass\", \"check\"), classes = c(\"other\", \"eight\"))", sep = "\n"),
  yw_confusion = paste(
    "Counts of (decision, true class) pairs: a numeric matrix, rows decisions, columns",
    "classes. Factor levels give the order of classes and decisions; numbers and logicals",
    "keep R's order (1, 2, 10; FALSE, TRUE); text labels are sorted. 'classes' and",
    "'decision_set' override it and may list labels that never occur (NA labels: an error).",
    sep = "\n"),
  yw_yield = paste(
    "The utility yield sum(U * C) / sum(C): the average utility per item of the decisions",
    "tallied in 'confusion', under the utility matrix 'utility' (labels matched by name).",
    "The only admissible score: it ranks classifiers as the problem itself does.", sep = "\n"),
  yw_metrics = paste(
    "The usual metrics of a confusion matrix (accuracy, precision, recall, F1, MCC, ...),",
    "as a data.frame with each metric's value, whether it is admissible (ranks as some",
    "utility matrix does) and why. 'positive' names the positive class of one-vs-rest",
    "metrics (precision, recall, specificity, f1, fowlkes_mallows; default on two classes:",
    "the first class). On more than two classes give 'positive' (that class against the",
    "rest) or 'average' (\"macro\", \"weighted\" or \"micro\"); with neither, those",
    "metrics are NA and a warning says so.", sep = "\n"),
  yw_audit = paste(
    "How often each metric ranks pairs of simulated binary classifiers wrongly, and how",
    "often the utility yield does when the utility matrix is known only up to errors of",
    "sd 'error_sd'. Returns a data.frame (metric, error_sd, fraction_wrong, mc_se).", sep = "\n"),
  yw_fit = paste(
    "Fits the probability transducer p(class | output) to calibration data: 'data' holds the",
    "true classes in column 'class_col' and the classifier's numeric outputs in",
    "'output_cols'. Returns a handle for yw_predict, yw_decide, yw_long_run_utility,",
    "yw_compare and yw_save. NAs are an error naming column and rows. The class order is",
    "'classes', else the factor levels, else R's order of numbers and logicals (1, 2, 10),",
    "else sorted text; an output with one column per class is read in that order.",
    "kernel_tail_cut = 0 keeps every kernel value in the likelihood (slower with two output",
    "columns; the fit warns when the default's sparse sums mattered). class_reduction =",
    "\"auto\" models a probability vector of 4 or more classes as the rank of the true class",
    "against the margin of its top two outputs; \"ranks\" always, NULL never (docs/model.md).",
    "likelihood_bins = \"auto\" merges more than 2,000 distinct continuous outputs in bins",
    "1/16 of a kernel's width (the fit checks the result against the exact likelihood);",
    "NULL keeps every output, a number in (0, 1] bins at that fraction.", sep = "\n"),
  yw_predict = paste(
    "Probabilities of each class for the outputs in 'data' (the transducer's output columns),",
    "with 'prob' variability bands: a long data.frame (item, class, probability, lower,",
    "upper). 'prevalences' (named by class) gives deployment class frequencies.", sep = "\n"),
  yw_decide = paste(
    "Maximum-expected-utility decisions, a factor whose levels are the utility matrix's",
    "decisions. The first argument is a yw_fit() transducer (with 'data' holding its output",
    "columns) or a numeric matrix of probabilities whose column names are the utility's",
    "classes: matched by name, in any order (a matrix without colnames, or with other",
    "classes, is an error). 'prevalences' (named by class) as for yw_predict.", sep = "\n"),
  yw_long_run_utility = paste(
    "Posterior draws of the long-run utility per item of a rule ('augmented': maximum",
    "expected utility; 'standard': argmax or threshold 0.5) under 'utility' (a matrix, or a",
    "named list of matrices). A posterior::draws_df (.chain, .iteration, .draw) when the",
    "posterior package is installed, else a data.frame with those columns.", sep = "\n"),
  yw_compare = paste(
    "Compares classifiers by their long-run utility: 'transducers' is a named list of",
    "yw_fit() results. Returns a list of data.frames: summary (posterior mean, sd,",
    "quantiles, P(best)), superiority (P(row yields more than column)), prob_best, and the",
    "draws (a draws_df when posterior is installed).", sep = "\n"),
  yw_save = "Writes a transducer to a NetCDF file (no pickle); yw_load() reads it back exactly.",
  yw_load = "Reads a transducer written by yw_save() (or Python's Transducer.save).",
  yw_report = paste(
    "Runs the batch report of a TOML configuration (see data/digits_report.toml in",
    "yieldwise) and writes the folder 'out' (report.html, summary.csv, superiority.csv,",
    "draws.nc, config.lock.toml). Returns the folder's path, invisibly. chains, warmup,",
    "draws and backend override [sampler]; backend = 'laplace' (a Normal approximation,",
    "seconds per fit) checks a configuration's layout, not for decisions.", sep = "\n"),
  yw_help = "Help on the yw_ functions: yw_help() lists them, yw_help(\"yw_fit\") explains one."
)
