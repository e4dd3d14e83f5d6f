"""Commands over finished runs: digest, cache explain, pack and unpack."""
