"""Set-up: the command line, the one frozen Config, `check`, `install`."""
