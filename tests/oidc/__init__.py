"""node-oidc-provider as the tests' third-party authorization server: provider.mjs runs it, harness.py drives it."""
