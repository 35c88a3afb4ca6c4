"""Set-up: the command line, the Config, `check`, `install`.

One frozen Config; the client configs.
"""
