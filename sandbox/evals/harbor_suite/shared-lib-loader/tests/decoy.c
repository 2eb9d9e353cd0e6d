/* A different libcheck.so.1, for the caller's LD_LIBRARY_PATH. */
char check_char(const char *code) { (void)code; return '?'; }
const char *check_version(void) { return "0.0-decoy"; }
