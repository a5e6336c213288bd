"""judgecal: length-bias calibration for LLM judges and a log-likelihood multiple-choice scorer."""

__version__ = "0.1.0"
