"""notes_digest_agent: a test agent in the shape of AgentNode's agent packs."""
