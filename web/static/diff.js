// The diff page is rendered on the server; nothing to do here.
