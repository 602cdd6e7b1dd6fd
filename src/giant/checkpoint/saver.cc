#include "giant/checkpoint/saver.h"

// Placeholder: implemented by issue 18 work in progress.
