#include "giant/checkpoint/checkpoint_dir.h"

// Placeholder: implemented by issue 18 work in progress.
