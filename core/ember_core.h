// Everything core offers, in one include: tensors, factories, ops, random generators.
#pragma once

#include "core/device.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/factory.h"
#include "core/grad_mode.h"
#include "core/ops.h"
#include "core/random.h"
#include "core/tensor.h"
#include "core/version.h"
