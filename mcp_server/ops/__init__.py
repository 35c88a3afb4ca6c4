"""Operations: what the process logs, counts and runs on.

Records, logs, metrics, trace context, workers, CPUs, the listener, stop signals, the
collector's settings and failures as values.
"""
