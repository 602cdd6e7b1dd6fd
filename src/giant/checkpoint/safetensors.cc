#include "giant/checkpoint/safetensors.h"

// Placeholder: implemented by issue 18 work in progress.
