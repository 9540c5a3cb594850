// SPDX-License-Identifier: Apache-2.0
// Every op family header: include this only where a switch over all ops is generated.
#pragma once

#include "compiler/ops/attention.h"
#include "compiler/ops/control.h"
#include "compiler/ops/elementwise.h"
#include "compiler/ops/image.h"
#include "compiler/ops/indexing.h"
#include "compiler/ops/linalg.h"
#include "compiler/ops/misc.h"
#include "compiler/ops/ml.h"
#include "compiler/ops/nn.h"
#include "compiler/ops/quantize.h"
#include "compiler/ops/random.h"
#include "compiler/ops/reduce.h"
#include "compiler/ops/rnn.h"
#include "compiler/ops/shape.h"
#include "compiler/ops/signal.h"
