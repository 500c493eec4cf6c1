"""Accounts use Django's own User and DRF's Token models; nothing extra is stored."""
