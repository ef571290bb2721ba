"""Experimental parts of ember.fx."""
