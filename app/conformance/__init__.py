"""A black-box suite that checks a running memory service against the contract, over HTTP only."""
