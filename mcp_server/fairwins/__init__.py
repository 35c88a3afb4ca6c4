"""The FairWins offer: the snapshot's tools, build_intent, resources, prompts, payments, honest wording."""
