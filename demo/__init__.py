"""`make demo`: the sandbox gateway and the server over HTTP on loopback, a scripted session, the lines to connect."""
