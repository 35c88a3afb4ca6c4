"""The container image test: the stand-in base recipe and the podman helper."""
