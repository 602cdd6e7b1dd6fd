#include "giant/train/generate.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "giant/parallel/tensor_collectives.h"

namespace giant::train {

std::string generate_text(parallel::LayerStack& model, const data::Tokenizer& tokenizer,
                          const SampleOptions& options, const parallel::TensorParallelGroup& tp) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  std::vector<int32_t> tokens = tokenizer.encode(options.prompt);
  if (tokens.empty()) {
    tokens = tokenizer.encode("\n");
  }
  at::Generator generator = at::detail::createCPUGenerator(options.seed);
  const auto device = model->parameters().front().device();
  for (int64_t i = 0; i < options.tokens; ++i) {
    const size_t context = std::min<size_t>(tokens.size(), static_cast<size_t>(options.seq_len));
    std::vector<int64_t> window(tokens.end() - static_cast<std::ptrdiff_t>(context), tokens.end());
    torch::Tensor input =
        torch::tensor(window, torch::kLong).view({1, static_cast<int64_t>(context)}).to(device);
    torch::Tensor logits = model->forward(input).select(1, static_cast<int64_t>(context) - 1)[0];
    if (tp.size > 1) logits = parallel::gather_from_region(logits, *tp.comm, 0);
    torch::Tensor probabilities =
        (logits.narrow(0, 0, options.vocab).to(torch::kFloat).cpu() / options.temperature).softmax(0);
    tokens.push_back(static_cast<int32_t>(torch::multinomial(probabilities, 1, false, generator).item<int64_t>()));
  }
  if (was_training) {
    model->train();
  }
  return tokenizer.decode(tokens);
}

}  // namespace giant::train
