"""Every table and figure builder, grouped by what they describe, plus the forecast."""
