"""The dispute game off chain: encodings, a party's computation, players, chain client."""
