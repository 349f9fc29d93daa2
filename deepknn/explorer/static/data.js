// A server-side explorer has no exported data; a static export replaces this file.
