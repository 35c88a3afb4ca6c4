"""Operations: records, logs, metrics, trace context, workers, CPUs, the listener, the watchdog."""
