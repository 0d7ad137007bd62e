// A submission's own "hidden test": it replaces nothing, the grader ignores it.
int main() { return 0; }
