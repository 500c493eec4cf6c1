"""Users and tokens are administered with Django's and DRF's own admin pages."""
