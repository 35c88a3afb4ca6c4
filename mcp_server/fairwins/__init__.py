"""The FairWins offer: tools, build_intent, resources, prompts, payments."""
