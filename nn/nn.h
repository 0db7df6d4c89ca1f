// Everything in ember::nn: Module, the layers, containers, losses and initialisers.
#pragma once

#include "autograd/functional.h"
#include "nn/init.h"
#include "nn/module.h"
#include "nn/modules/activation.h"
#include "nn/modules/batchnorm.h"
#include "nn/modules/container.h"
#include "nn/modules/conv.h"
#include "nn/modules/embedding.h"
#include "nn/modules/linear.h"
#include "nn/modules/loss.h"
#include "nn/modules/normalization.h"
#include "nn/modules/pooling.h"
