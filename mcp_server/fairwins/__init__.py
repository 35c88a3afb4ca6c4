"""The FairWins offer: tools, build_intent, resources, prompts, payments.

The snapshot's tools, and honest wording.
"""
