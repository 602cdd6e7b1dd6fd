#include "giant/checkpoint/manifest.h"

// Placeholder: implemented by issue 18 work in progress.
