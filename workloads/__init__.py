"""Load patterns and the Nexmark data generator."""
