#include "giant/checkpoint/loader.h"

// Placeholder: implemented by issue 18 work in progress.
