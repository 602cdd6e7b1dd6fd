// Summaries of measured samples, one convention for the whole tree.
#pragma once

#include <vector>

namespace giant {

// The middle value of `values`; for an even count the mean of the two middle
// ones; 0 for none.
double median(std::vector<double> values);

}  // namespace giant
