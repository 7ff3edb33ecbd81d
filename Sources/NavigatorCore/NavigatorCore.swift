// Filled by issue 3.
