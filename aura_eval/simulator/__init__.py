"""The planted-truth simulator (`aura_sim/<name>` models), outside the model module."""
