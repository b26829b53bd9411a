// An error page: nothing to do here.
