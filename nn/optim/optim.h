// Everything nn/optim offers, in one include: optimizers, LR schedules, gradient clipping.
//
//   using namespace ember::optim;
//   SGD sgd({ParamGroup(weights), ParamGroup(biases, SGDOptions(0.1).weight_decay(0))},
//           SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(5e-4));
//   LinearWarmup schedule(sgd, 5, 0.1, std::make_unique<CosineAnnealingLR>(sgd, 195));
//   for (...) { sgd.zero_grad(); loss.backward(); clip_grad_norm_(sgd.parameters(), 5.0); sgd.step(); }
//   schedule.step();   // once per epoch
#pragma once

#include "nn/optim/adam.h"
#include "nn/optim/clip_grad.h"
#include "nn/optim/cosine_annealing_lr.h"
#include "nn/optim/linear_warmup.h"
#include "nn/optim/lr_scheduler.h"
#include "nn/optim/multi_step_lr.h"
#include "nn/optim/one_cycle_lr.h"
#include "nn/optim/optimizer.h"
#include "nn/optim/param_group.h"
#include "nn/optim/sgd.h"
#include "nn/optim/state_dict.h"
#include "nn/optim/step_lr.h"
