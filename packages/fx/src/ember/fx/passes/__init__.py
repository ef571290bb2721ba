"""Graph passes: analyses and rewrites over ember.fx graphs."""
