// Placeholder: being written (issue 19).
#include "giant/data/indexed_dataset.h"

#include "giant/base/error.h"

namespace giant::data {

struct IndexedDataset::Mapping {};
struct IndexedDatasetWriter::Output {};

std::shared_ptr<const IndexedDataset> IndexedDataset::open(const std::string& prefix) {
  throw FormatError(prefix + ".idx: indexed datasets are not implemented yet");
}
IndexedDataset::~IndexedDataset() = default;

IndexedDatasetWriter::IndexedDatasetWriter(std::string prefix, TokenDtype dtype)
    : prefix_(std::move(prefix)), dtype_(dtype) {
  throw Error("indexed dataset writer is not implemented yet");
}
IndexedDatasetWriter::~IndexedDatasetWriter() = default;

}  // namespace giant::data
