#include "giant/train/generate.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "giant/parallel/tensor_collectives.h"

namespace giant::train {

std::string generate_text(const NextLogits& next_logits, const data::Tokenizer& tokenizer,
                          const SampleOptions& options) {
  torch::NoGradGuard no_grad;
  std::vector<int32_t> tokens = tokenizer.encode(options.prompt);
  if (tokens.empty()) {
    tokens = tokenizer.encode("\n");
  }
  at::Generator generator = at::detail::createCPUGenerator(options.seed);
  for (int64_t i = 0; i < options.tokens; ++i) {
    const size_t context = std::min<size_t>(tokens.size(), static_cast<size_t>(options.seq_len));
    std::vector<int64_t> window(tokens.end() - static_cast<std::ptrdiff_t>(context), tokens.end());
    const torch::Tensor input = torch::tensor(window, torch::kLong).view({1, static_cast<int64_t>(context)});
    const torch::Tensor logits = next_logits(input);
    torch::Tensor probabilities =
        (logits.narrow(0, 0, options.vocab).to(torch::kFloat).cpu() / options.temperature).softmax(0);
    tokens.push_back(static_cast<int32_t>(torch::multinomial(probabilities, 1, false, generator).item<int64_t>()));
  }
  return tokenizer.decode(tokens);
}

NextLogits model_next_logits(parallel::LayerStack model, const parallel::TensorParallelGroup& tp) {
  return [model, tp](const at::Tensor& context) mutable {
    const auto device = model->parameters().front().device();
    torch::Tensor logits = model->forward(context.to(device)).select(1, context.size(1) - 1)[0];
    if (tp.size > 1) logits = parallel::gather_from_region(logits, *tp.comm, 0);
    return logits;
  };
}

}  // namespace giant::train
