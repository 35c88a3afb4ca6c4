"""Set-up: the command line, one frozen Config, `check`, `install` and the client configs."""
